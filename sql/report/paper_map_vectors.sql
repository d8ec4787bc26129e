-- paper_map_vectors: every embedded paper with its vector, topic and name (macro
-- paper_title), for the map of a version published before paper_coordinates existed,
-- which the report then projects itself (PCA).
-- grain: one row per paper that has an embedding, ordered by paper_id for a stable projection.
-- upstream: papers, embeddings, paper_topics.
with vectors as (
    select paper_id, embedding from embeddings
),

assigned as (
    select paper_id, topic_id from paper_topics
),

final as (
    select
        papers.paper_id,
        assigned.topic_id,
        paper_title(papers.title, papers.abstract) as title,
        vectors.embedding
    from papers
    join vectors using (paper_id)
    left join assigned using (paper_id)
    order by papers.paper_id
)

select * from final
