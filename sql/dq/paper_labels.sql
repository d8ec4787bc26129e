-- paper_labels: how a person knows a paper: its name (macro paper_title: the title, or the
-- abstract's first words when untitled) and the file and line it was first found at.
-- grain: one row per paper_id in getvariable('paper_ids').
-- upstream: papers.
with wanted as (
    select unnest(getvariable('paper_ids')) as paper_id
),

found as (
    select
        papers.paper_id,
        paper_title(papers.title, papers.abstract) as title,
        paper_untitled(papers.title) as untitled,
        papers.source_path,
        papers.line
    from papers
    join wanted using (paper_id)
),

final as (
    select * from found
    order by paper_id
)

select * from final
