-- map_points: every paper's place on the map, its topic, venue and year (what the map can
-- colour by) and its name for the hover text.
-- grain: one row per paper, ordered by paper_id.
-- upstream: paper_coordinates, paper_topics, papers; macro paper_title.
with final as (
    select
        paper_coordinates.paper_id,
        paper_coordinates.x,
        paper_coordinates.y,
        paper_topics.topic_id,
        papers.venue,
        papers.year,
        paper_title(papers.title, papers.abstract) as title
    from paper_coordinates
    join papers using (paper_id)
    left join paper_topics using (paper_id)
    order by paper_coordinates.paper_id
)

select * from final
