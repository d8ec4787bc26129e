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
    -- the nearest paper, ties to the first id: one pass (arg_min), no sort of every paper
    select
        placed.topic_id,
        arg_min(
            {'x': placed.x, 'y': placed.y},
            {'d': (placed.x - medians.mx) ^ 2 + (placed.y - medians.my) ^ 2, 'id': placed.paper_id}
        ) as place
    from placed
    join medians using (topic_id)
    group by placed.topic_id
),

final as (
    select
        topics.topic_id,
        topics.label,
        topics.top_terms,
        topics.papers,
        round(places.place.x, 5) as x,
        round(places.place.y, 5) as y
    from topics
    left join places using (topic_id)
    order by topics.papers desc, topics.topic_id
)

select * from final
