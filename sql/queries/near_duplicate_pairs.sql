-- near_duplicate_pairs: the closest pairs of distinct papers, with where each was found.
-- grain: one row per pair. upstream: neighbors, paper_sources.
-- Reads the neighbour table rather than duplicates, so it lists the closest pairs even
-- when none reaches the duplicate threshold.
with pairs as (
    select
        least(paper_id, neighbor_id) as paper_a,
        greatest(paper_id, neighbor_id) as paper_b,
        max(score) as score
    from neighbors
    where rank = 1
    group by all
),

first_location as (
    select paper_id, min(source_path || ':' || line) as location
    from paper_sources
    group by all
),

final as (
    select pairs.paper_a, a.location as location_a, pairs.paper_b, b.location as location_b, pairs.score
    from pairs
    join first_location as a on a.paper_id = pairs.paper_a
    join first_location as b on b.paper_id = pairs.paper_b
    order by pairs.score desc, pairs.paper_a
    limit 20
)

select * from final
