-- history: the expectation results of the runs that published the last
-- getvariable('trend_versions') versions up to getvariable('version'), for the trend.
-- grain: one row per version and expectation.
-- upstream: dq_results, runs.
with publishing_runs as (
    select snapshot_id as version, run_id
    from runs
    where snapshot_id <= getvariable('version')
    qualify row_number() over (order by snapshot_id desc) <= getvariable('trend_versions')
),

results as (
    select publishing_runs.version, dq_results.*
    from dq_results
    join publishing_runs using (run_id)
),

final as (
    select
        version,
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
        observed_value
    from results
    order by version, suite
)

select * from final
