-- facets: what a search filters papers on (venue, year, topic), for flows/read/ranking.py to
-- filter by; the same columns as cards.sql, without the text.
-- grain: one row per paper_id.
-- upstream: papers, paper_topics, topics.
with final as (
    select
        papers.paper_id,
        papers.venue,
        papers.year,
        paper_topics.topic_id,
        topics.label as topic
    from papers
    left join paper_topics using (paper_id)
    left join topics using (topic_id)
)

select * from final
