-- neighbors: the top-k most similar papers of every paper, by cosine similarity.
-- grain: one row per (paper_id, neighbor_id); rank 1 is the closest.
-- upstream: neighbor_candidates (top-k per paper: exact up to exact_neighbors_max papers,
-- from an HNSW graph above), papers.
with candidates as (
    select paper_id, neighbor_id, score
    from neighbor_candidates
    where paper_id <> neighbor_id
),

ranked as (
    select
        paper_id,
        neighbor_id,
        row_number() over (
            partition by paper_id order by score desc, neighbor_id
        ) as rank,
        round(score, 6)::float as score
    from candidates
),

final as (
    select ranked.*
    from ranked
    where rank <= getvariable('neighbors_k')
    order by paper_id, rank
)

select * from final
