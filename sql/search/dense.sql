-- dense search: papers ranked by cosine similarity of their embedding to a query vector.
-- grain: one row per hit, best first.
-- upstream: embeddings.
-- parameters: $query (FLOAT[] unit vector from the embeddings' model), $k (hits),
-- $ids (the papers that may be returned, from filtered.sql; NULL for all), $exclude (a
-- paper id left out, or NULL).
with candidates as (
    select paper_id, embedding
    from embeddings
    where ($ids is null or paper_id in (select unnest($ids::VARCHAR[])))
      and ($exclude is null or paper_id <> $exclude)
),

final as (
    select
        paper_id,
        list_cosine_similarity(embedding, $query::FLOAT[]) as score
    from candidates
    order by score desc, paper_id
    limit $k
)

select * from final
