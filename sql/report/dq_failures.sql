-- dq_failures: every failed expectation of the run that published version
-- getvariable('version'), with its first offending rows, each named (macro paper_title)
-- when its id begins with a paper's.
-- grain: one row per failed expectation.
-- upstream: dq_results, runs, papers.
with publishing_run as (
    select run_id from runs
    where snapshot_id = getvariable('version')
),

failed as (
    select row_number() over () as check_no, dq_results.*
    from dq_results
    join publishing_run using (run_id)
    where not dq_results.success
),

-- A row's id is its table's key columns joined by "/"; papers' keys start with paper_id.
sample_keys as (
    select check_no, unnest(ids) as row_key, generate_subscripts(ids, 1) as pos
    from (select check_no, coalesce(unexpected_ids, [])[1:5] as ids from failed)
),

named_samples as (
    select
        sample_keys.check_no,
        list(
            {
                'key': sample_keys.row_key,
                'title': paper_title(papers.title, papers.abstract),
                'untitled': paper_untitled(papers.title)
            }
            order by sample_keys.pos
        ) as sample_rows
    from sample_keys
    left join papers on papers.paper_id = split_part(sample_keys.row_key, '/', 1)
    group by sample_keys.check_no
),

final as (
    select
        failed.severity,
        failed.suite,
        failed.expectation,
        coalesce(failed.column_name, '') as column_name,
        coalesce(failed.unexpected_count, 0) as unexpected_count,
        array_to_string(coalesce(failed.unexpected_ids, [])[1:5], ', ') as sample_ids,
        coalesce(named_samples.sample_rows, []) as sample_rows,
        coalesce(failed.observed_value, '') as observed_value
    from failed
    left join named_samples using (check_no)
    order by
        case failed.severity when 'critical' then 0 else 1 end,
        failed.suite,
        failed.expectation,
        column_name
)

select * from final
