-- versions: one row per version paperlake published, with its commit summary.
-- grain: one row per DuckLake snapshot that carries a paperlake commit message.
-- upstream: the catalog's snapshots() table function.
with snapshots as (
    select snapshot_id, snapshot_time, commit_message, commit_extra_info
    from lake.snapshots()
    where commit_message is not null
),

final as (
    select
        snapshot_id as version,
        snapshot_time::timestamp(0) as time,
        commit_message as summary
    from snapshots
    order by version
)

select * from final
