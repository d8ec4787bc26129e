-- new_duplicates: near-duplicate pairs present at version b and not at version a.
-- grain: one row per new pair.
-- upstream: duplicates at getvariable('version_a') and getvariable('version_b').
with pairs_a as (
    select paper_a, paper_b from duplicates at (version => getvariable('version_a'))
),

final as (
    select b.paper_a, b.paper_b, b.score, b.kind, b.source_a, b.line_a, b.source_b, b.line_b
    from duplicates as b at (version => getvariable('version_b'))
    anti join pairs_a using (paper_a, paper_b)
)

select * from final
order by score desc
