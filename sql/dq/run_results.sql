-- run_results: every expectation result of the run that published version
-- getvariable('version'); the page orders them.
-- grain: one row per expectation of every suite the run checked.
-- upstream: dq_results, runs.
with publishing_run as (
    select run_id from runs
    where snapshot_id = getvariable('version')
),

results as (
    select dq_results.*
    from dq_results
    join publishing_run using (run_id)
),

final as (
    select
        run_id,
        suite,
        expectation,
        column_name,
        kwargs,
        severity,
        blocking,
        success,
        element_count,
        unexpected_count,
        unexpected_ids,
        observed_value
    from results
)

select * from final
