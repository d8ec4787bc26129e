-- map_points: the map's papers, as /api/map sends them, in paper_id order (a paper's place
-- on the map is its row here, from 0): its place, and its topic, venue and year each as its
-- place in the lists $topics (topic ids: map_topics's order), $venues (map_venues's) and
-- $years (map_years's), -1 for none.
-- grain: one row per paper on the map.
-- upstream: paper_coordinates, paper_topics, papers.
with topics as (
    select unnest($topics::INTEGER[]) as topic_id, generate_subscripts($topics, 1) - 1 as at
),

venues as (
    select unnest($venues::VARCHAR[]) as venue, generate_subscripts($venues, 1) - 1 as at
),

years as (
    select unnest($years::INTEGER[]) as year, generate_subscripts($years, 1) - 1 as at
),

final as (
    select
        paper_coordinates.paper_id,
        paper_coordinates.x::FLOAT as x,
        paper_coordinates.y::FLOAT as y,
        coalesce(topics.at, -1) as topic,
        coalesce(venues.at, -1) as venue,
        coalesce(years.at, -1) as year
    from paper_coordinates
    join papers using (paper_id)
    left join paper_topics using (paper_id)
    left join topics using (topic_id)
    left join venues using (venue)
    left join years using (year)
    order by paper_coordinates.paper_id
)

select * from final
