-- paper_changes: papers added, removed or changed between two versions.
-- grain: one row per change; a changed paper pairs its old and new id.
-- upstream: papers and paper_sources at versions getvariable('version_a') and ('version_b').
-- A paper whose text changed gets a new content id; it counts as changed, not as one
-- removal and one addition, when the old and new ids share a location (file and record
-- number) or an external id.
with old_papers as (
    select paper_id, external_id from papers at (version => getvariable('version_a'))
),

new_papers as (
    select paper_id, external_id from papers at (version => getvariable('version_b'))
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

final as (
    select 'changed' as change, old_id, new_id from changed
    union all
    select 'removed', paper_id, null from removed
    where paper_id not in (select old_id from changed)
    union all
    select 'added', null, paper_id from added
    where paper_id not in (select new_id from changed)
)

select * from final
order by change, coalesce(old_id, new_id)
