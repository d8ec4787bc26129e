-- map_topics: every topic with its label, size and where its label goes on the map (the
-- median place of its papers).
-- grain: one row per topic, largest first.
-- upstream: topics, paper_topics, paper_coordinates.
with places as (
    select
        paper_topics.topic_id,
        median(paper_coordinates.x) as x,
        median(paper_coordinates.y) as y
    from paper_topics
    join paper_coordinates using (paper_id)
    group by paper_topics.topic_id
),

final as (
    select
        topics.topic_id,
        topics.label,
        topics.papers,
        round(places.x, 5) as x,
        round(places.y, 5) as y
    from topics
    left join places using (topic_id)
    order by topics.papers desc, topics.topic_id
)

select * from final
