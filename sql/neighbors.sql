-- neighbors: the top-k most similar papers of every paper, by cosine similarity.
-- grain: one row per (paper_id, neighbor_id); rank 1 is the closest.
-- upstream: neighbor_candidates (each paper's top k, ranked best first, ties by neighbour
-- id: exact up to exact_neighbors_max papers, from an HNSW graph above; see
-- flows/derive/neighbours.py split_candidates).
with final as (
    select
        paper_id,
        neighbor_id,
        rank,
        round(score, 6)::float as score
    from neighbor_candidates
    where rank <= getvariable('neighbors_k')
      and paper_id <> neighbor_id
    order by paper_id, rank
)

select * from final
