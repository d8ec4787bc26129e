-- top_duplicates: the most similar near-duplicate pairs, with where each paper was found.
-- grain: one row per pair, highest score first, at most getvariable('top_n') rows.
-- upstream: duplicates.
with pairs as (
    select paper_a, paper_b, score, kind, source_a, line_a, source_b, line_b
    from duplicates
),

final as (
    select
        paper_a,
        paper_b,
        score,
        kind,
        regexp_extract(source_a, '[^/]*$') || ':' || line_a as location_a,
        regexp_extract(source_b, '[^/]*$') || ':' || line_b as location_b
    from pairs
    order by score desc, paper_a, paper_b
    limit getvariable('top_n')
)

select * from final
