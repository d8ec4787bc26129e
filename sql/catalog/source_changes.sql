-- source_changes: the raw files a paper gained or lost between two versions (a file that
-- now holds it too, or no longer does); a record that only moved within its file is no
-- change.
-- grain: one row per (paper_id, source_path) in one version only, for papers in both
-- versions, with the record's number in the version that has it. Each row names its paper
-- as version b has it (macro paper_title).
-- upstream: papers and paper_sources at versions getvariable('version_a') and ('version_b').
with old_sources as (
    select paper_id, source_path, min(record_no) as record_no
    from paper_sources at (version => getvariable('version_a'))
    group by paper_id, source_path
),

new_sources as (
    select paper_id, source_path, min(record_no) as record_no
    from paper_sources at (version => getvariable('version_b'))
    group by paper_id, source_path
),

new_papers as (
    select paper_id, paper_title(title, abstract) as title
    from papers at (version => getvariable('version_b'))
),

kept_papers as (
    select paper_id from papers at (version => getvariable('version_a'))
    intersect
    select paper_id from new_papers
),

changed as (
    select 'gained' as change, new_sources.*
    from new_sources
    anti join old_sources using (paper_id, source_path)
    union all
    select 'lost', old_sources.*
    from old_sources
    anti join new_sources using (paper_id, source_path)
),

final as (
    select
        changed.change,
        changed.paper_id,
        new_papers.title,
        changed.source_path,
        changed.record_no
    from changed
    join kept_papers using (paper_id)
    join new_papers using (paper_id)
)

select * from final
order by paper_id, change, source_path
