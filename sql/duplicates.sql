-- duplicates: pairs of distinct papers whose abstracts are near-duplicates.
-- grain: one row per unordered pair (paper_a < paper_b) at or above the threshold.
-- Pairs of papers in groups larger than duplicate_group_max are left to duplicate_groups.
-- upstream: similar_pairs (pairs above the threshold, each paper's closest up to a cap:
-- exact, or from the HNSW graph with crowded rows checked exactly; see flows/derive/neighbours.py
-- nearest), pair_groups, papers.
with small_groups as (
    select paper_id
    from pair_groups
    where group_size <= getvariable('duplicate_group_max')
),

pairs as (
    select
        least(paper_id, neighbor_id) as paper_a,
        greatest(paper_id, neighbor_id) as paper_b,
        max(score) as score
    from similar_pairs
    where paper_id <> neighbor_id
      and score >= getvariable('duplicate_threshold')
      and paper_id in (select paper_id from small_groups)
    group by all
),

final as (
    select
        pairs.paper_a,
        pairs.paper_b,
        -- Rounded up, so that the stored float never falls below the threshold it passed.
        (ceil(pairs.score * 1e6) / 1e6)::float as score,
        case when pairs.score >= 0.999 then 'identical' else 'near' end as kind,
        a.source_path as source_a,
        a.line as line_a,
        b.source_path as source_b,
        b.line as line_b
    from pairs
    join papers as a on a.paper_id = pairs.paper_a
    join papers as b on b.paper_id = pairs.paper_b
    order by score desc, paper_a, paper_b
)

select * from final
