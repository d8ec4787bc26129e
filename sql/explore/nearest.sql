-- nearest: a paper's nearest papers as the run stored them, nearest first.
-- grain: one row per neighbour of $paper_id.
-- upstream: neighbors.
with final as (
    select neighbor_id as paper_id, rank, round(score, 4) as score
    from neighbors
    where paper_id = $paper_id
    order by rank
)

select * from final
