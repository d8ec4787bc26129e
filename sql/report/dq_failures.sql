-- dq_failures: every failed expectation of the run that published version
-- getvariable('version'), with the first offending rows.
-- grain: one row per failed expectation.
-- upstream: dq_results, runs.
with publishing_run as (
    select run_id from runs
    where snapshot_id = getvariable('version')
),

failed as (
    select dq_results.*
    from dq_results
    join publishing_run using (run_id)
    where not dq_results.success
),

final as (
    select
        severity,
        suite,
        expectation,
        coalesce(column_name, '') as column_name,
        coalesce(unexpected_count, 0) as unexpected_count,
        array_to_string(coalesce(unexpected_ids, [])[1:5], ', ') as sample_ids,
        coalesce(observed_value, '') as observed_value
    from failed
    order by case severity when 'critical' then 0 else 1 end, suite, expectation, column_name
)

select * from final
