-- versions: what the version picker offers: each published version, when it was made
-- and how many papers it holds.
-- grain: one row per version paperlake published, newest first.
-- upstream: the catalog's snapshots() table function, runs.
with snapshots as (
    select snapshot_id, snapshot_time
    from lake.snapshots()
    where commit_message is not null
),

final as (
    select
        snapshots.snapshot_id as version,
        strftime(snapshots.snapshot_time, '%Y-%m-%d %H:%M') as published,
        runs.papers
    from snapshots
    left join runs on runs.snapshot_id = snapshots.snapshot_id
    order by version desc
)

select * from final
