-- dense search: papers ranked by cosine similarity of their embedding to a query vector.
-- grain: one row per hit, best first.
-- upstream: embeddings, papers.
-- parameters: $query (FLOAT[] unit vector from the embeddings' model), $k (hits).
with scored as (
    select
        paper_id,
        list_cosine_similarity(embedding, $query::FLOAT[]) as score
    from embeddings
),

final as (
    select
        scored.paper_id,
        papers.title,
        papers.venue,
        papers.year,
        round(scored.score::double, 4) as score,
        papers.abstract
    from scored
    join papers using (paper_id)
    order by scored.score desc, scored.paper_id
    limit $k
)

select * from final
