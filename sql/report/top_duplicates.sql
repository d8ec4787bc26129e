-- top_duplicates: the most similar near-duplicate pairs, each paper named (macro
-- paper_title) and located at the file and line it was found.
-- grain: one row per pair, highest score first, at most getvariable('top_n') rows.
-- upstream: duplicates, papers.
with pairs as (
    select paper_a, paper_b, score, kind, source_a, line_a, source_b, line_b
    from duplicates
),

titles as (
    select paper_id, paper_title(title, abstract) as title, paper_untitled(title) as untitled
    from papers
),

final as (
    select
        pairs.paper_a,
        title_a.title as title_a,
        coalesce(title_a.untitled, true) as untitled_a,
        pairs.paper_b,
        title_b.title as title_b,
        coalesce(title_b.untitled, true) as untitled_b,
        pairs.score,
        pairs.kind,
        regexp_extract(pairs.source_a, '[^/]*$') || ':' || pairs.line_a as location_a,
        regexp_extract(pairs.source_b, '[^/]*$') || ':' || pairs.line_b as location_b
    from pairs
    left join titles as title_a on title_a.paper_id = pairs.paper_a
    left join titles as title_b on title_b.paper_id = pairs.paper_b
    order by pairs.score desc, pairs.paper_a, pairs.paper_b
    limit getvariable('top_n')
)

select * from final
