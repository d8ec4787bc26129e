-- neighbors: Top-k nearest papers of every paper.
-- grain: one row per (paper_id, neighbor_id); rank 1 is the closest.
-- key: paper_id, neighbor_id
-- reads: neighbor_candidates
-- references: paper_id -> papers, neighbor_id -> papers
-- columns:
--   paper_id: the paper
--   neighbor_id: a near paper
--   rank: 1 = nearest
--   score: cosine similarity
-- Each paper's top k from neighbor_candidates, ranked best first, ties by neighbour id:
-- exact up to exact_neighbors_max papers, from an HNSW graph above.
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
