-- topics_by_venue: how many papers of each venue and year fall in each topic.
-- grain: one row per (venue, year, topic). upstream: topic_stats.
with final as (
    select venue, year, topic_id, label, papers
    from topic_stats
    order by venue, year, papers desc, topic_id
)

select * from final
