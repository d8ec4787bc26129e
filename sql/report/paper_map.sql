-- paper_map: every paper's place on the map (paper_coordinates: a t-SNE of the embeddings
-- made when the version was published, x and y in [-1, 1]), its topic and its name (macro
-- paper_title) for the hover text.
-- grain: one row per paper with coordinates, ordered by paper_id.
-- upstream: papers, paper_coordinates, paper_topics.
with places as (
    select paper_id, x, y from paper_coordinates
),

assigned as (
    select paper_id, topic_id from paper_topics
),

final as (
    select
        papers.paper_id,
        assigned.topic_id,
        paper_title(papers.title, papers.abstract) as title,
        places.x,
        places.y
    from papers
    join places using (paper_id)
    left join assigned using (paper_id)
    order by papers.paper_id
)

select * from final
