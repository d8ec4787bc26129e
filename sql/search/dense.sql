-- dense search: papers ranked by cosine similarity of their embedding to a query vector.
-- grain: one row per hit, best first.
-- upstream: embeddings, papers.
-- parameters: $query (FLOAT[] unit vector from the embeddings' model), $k (hits),
-- $venue and $year (NULL for any), $exclude (a paper id left out, or NULL).
with candidates as (
    select papers.paper_id
    from papers
    where ($venue is null or lower(papers.venue) = lower($venue))
      and ($year is null or papers.year = $year)
      and ($exclude is null or papers.paper_id <> $exclude)
),

final as (
    select
        embeddings.paper_id,
        list_cosine_similarity(embeddings.embedding, $query::FLOAT[]) as score
    from embeddings
    semi join candidates using (paper_id)
    order by score desc, paper_id
    limit $k
)

select * from final
