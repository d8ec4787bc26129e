-- topic_stats: papers per topic, venue and year.
-- grain: one row per (topic_id, venue, year).
-- upstream: paper_topics, topics, papers.
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
