-- run_summary: the run that published version getvariable('version').
-- grain: one row (none when the version has no recorded run).
-- upstream: runs.
with published_by as (
    select * from runs
    where snapshot_id = getvariable('version')
),

final as (
    select
        run_id,
        started_at::timestamp(0) as started_at,
        dq_outcome,
        files,
        records_seen,
        accepted,
        rejected
    from published_by
    order by started_at desc
    limit 1
)

select * from final
