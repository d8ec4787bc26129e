-- venue_topics: the topics a venue's papers fall in, with how many of them each.
-- grain: one row per topic of $venue's papers, most papers first.
-- upstream: papers, paper_topics, topics.
with final as (
    select paper_topics.topic_id, topics.label, count(*) as papers
    from papers
    join paper_topics using (paper_id)
    join topics using (topic_id)
    where papers.venue = $venue
    group by paper_topics.topic_id, topics.label
    order by papers desc, paper_topics.topic_id
)

select * from final
