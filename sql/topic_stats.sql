-- topic_stats: Papers per topic, venue and year.
-- grain: one row per (topic_id, venue, year).
-- key: topic_id, venue, year
-- reads: paper_topics, topics, papers
-- references: topic_id -> topics
-- columns:
--   topic_id: the topic
--   label: its label
--   venue: venue
--   year: year
--   papers: papers
with assigned as (
    select paper_topics.topic_id, papers.venue, papers.year
    from paper_topics
    join papers using (paper_id)
),

final as (
    select
        assigned.topic_id,
        topics.label,
        assigned.venue,
        assigned.year,
        count(*) as papers
    from assigned
    join topics using (topic_id)
    group by all
    order by assigned.topic_id, assigned.venue, assigned.year
)

select * from final
