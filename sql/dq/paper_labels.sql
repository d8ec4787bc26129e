-- paper_labels: how a person knows a paper: its title (or its first words when untitled)
-- and the file and line it was first found at.
-- grain: one row per paper_id in getvariable('paper_ids').
-- upstream: papers.
with wanted as (
    select unnest(getvariable('paper_ids')) as paper_id
),

found as (
    select
        papers.paper_id,
        nullif(trim(papers.title), '') as title,
        array_to_string(string_split(papers.abstract, ' ')[1:14], ' ') as first_words,
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
