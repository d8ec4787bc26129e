-- new_duplicates: near-duplicate pairs present at version b and not at version a, each
-- paper named (macro paper_title) as version b has it.
-- grain: one row per new pair.
-- upstream: duplicates at getvariable('version_a') and getvariable('version_b'), papers at
-- getvariable('version_b').
with pairs_a as (
    select paper_a, paper_b from duplicates at (version => getvariable('version_a'))
),

titles_b as (
    select paper_id, paper_title(title, abstract) as title
    from papers at (version => getvariable('version_b'))
),

new_pairs as (
    select b.paper_a, b.paper_b, b.score, b.kind, b.source_a, b.line_a, b.source_b, b.line_b
    from duplicates as b at (version => getvariable('version_b'))
    anti join pairs_a using (paper_a, paper_b)
),

final as (
    select
        new_pairs.paper_a,
        title_a.title as title_a,
        new_pairs.paper_b,
        title_b.title as title_b,
        new_pairs.score,
        new_pairs.kind,
        new_pairs.source_a,
        new_pairs.line_a,
        new_pairs.source_b,
        new_pairs.line_b
    from new_pairs
    left join titles_b as title_a on title_a.paper_id = new_pairs.paper_a
    left join titles_b as title_b on title_b.paper_id = new_pairs.paper_b
)

select * from final
order by score desc, paper_a, paper_b
