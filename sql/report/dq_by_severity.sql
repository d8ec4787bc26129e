-- dq_by_severity: expectations passed and failed, per severity, for the run that published
-- version getvariable('version').
-- grain: one row per severity.
-- upstream: dq_results, runs.
with publishing_run as (
    select run_id from runs
    where snapshot_id = getvariable('version')
),

results as (
    select dq_results.severity, dq_results.success
    from dq_results
    join publishing_run using (run_id)
),

counted as (
    select
        severity,
        count(*) filter (where success) as passed,
        count(*) filter (where not success) as failed
    from results
    group by severity
),

final as (
    select * from counted
    order by case severity when 'critical' then 0 when 'warning' then 1 else 2 end, severity
)

select * from final
