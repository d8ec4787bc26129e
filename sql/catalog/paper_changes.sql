-- paper_changes: papers added, removed or changed between two versions.
-- grain: one row per change; a changed paper pairs its old and new id. Each row names its
-- paper (macros paper_title, paper_untitled): a removed paper as version a had it, any
-- other as version b.
-- upstream: papers and paper_sources at versions getvariable('version_a') and ('version_b').
-- A paper whose text changed gets a new content id; it counts as changed, not as one
-- removal and one addition, when the old and new ids share a location (file and record
-- number) or an external id.
with old_papers as (
    select
        paper_id,
        external_id,
        paper_title(title, abstract) as title,
        paper_untitled(title) as untitled
    from papers at (version => getvariable('version_a'))
),

new_papers as (
    select
        paper_id,
        external_id,
        paper_title(title, abstract) as title,
        paper_untitled(title) as untitled
    from papers at (version => getvariable('version_b'))
),

old_locations as (
    select paper_id, source_path, record_no
    from paper_sources at (version => getvariable('version_a'))
),

new_locations as (
    select paper_id, source_path, record_no
    from paper_sources at (version => getvariable('version_b'))
),

removed as (
    select * from old_papers where paper_id not in (select paper_id from new_papers)
),

added as (
    select * from new_papers where paper_id not in (select paper_id from old_papers)
),

same_place as (
    select distinct removed.paper_id as old_id, added.paper_id as new_id
    from removed
    join old_locations using (paper_id)
    join new_locations
        on new_locations.source_path = old_locations.source_path
        and new_locations.record_no = old_locations.record_no
    join added on added.paper_id = new_locations.paper_id
),

same_external_id as (
    select removed.paper_id as old_id, added.paper_id as new_id
    from removed
    join added on added.external_id = removed.external_id
),

changed as (
    select old_id, min(new_id) as new_id
    from (select * from same_place union select * from same_external_id)
    group by old_id
),

listed as (
    select 'changed' as change, old_id, new_id from changed
    union all
    select 'removed', paper_id, null from removed
    where paper_id not in (select old_id from changed)
    union all
    select 'added', null, paper_id from added
    where paper_id not in (select new_id from changed)
),

final as (
    select
        listed.change,
        listed.old_id,
        listed.new_id,
        coalesce(new_papers.title, old_papers.title) as title,
        coalesce(new_papers.untitled, old_papers.untitled) as untitled
    from listed
    left join old_papers on old_papers.paper_id = listed.old_id
    left join new_papers on new_papers.paper_id = listed.new_id
)

select * from final
order by change, coalesce(old_id, new_id)
