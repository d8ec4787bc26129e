-- map_topics: every topic with its label, terms, size and where its label goes on the map:
-- at the paper of the topic nearest the median place of its papers (a topic in two parts
-- has its median between them, where none of its papers lies).
-- grain: one row per topic, largest first.
-- upstream: topics, paper_topics, paper_coordinates.
with placed as (
    select
        paper_topics.topic_id,
        paper_topics.paper_id,
        paper_coordinates.x,
        paper_coordinates.y
    from paper_topics
    join paper_coordinates using (paper_id)
),

medians as (
    select topic_id, median(x) as mx, median(y) as my
    from placed
    group by topic_id
),

places as (
    select
        placed.topic_id,
        placed.x,
        placed.y
    from placed
    join medians using (topic_id)
    qualify row_number() over (
        partition by placed.topic_id
        order by (placed.x - medians.mx) ^ 2 + (placed.y - medians.my) ^ 2, placed.paper_id
    ) = 1
),

final as (
    select
        topics.topic_id,
        topics.label,
        topics.top_terms,
        topics.papers,
        round(places.x, 5) as x,
        round(places.y, 5) as y
    from topics
    left join places using (topic_id)
    order by topics.papers desc, topics.topic_id
)

select * from final
