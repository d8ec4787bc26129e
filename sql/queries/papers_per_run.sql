-- papers_per_run: what each published run did.
-- grain: one row per run. upstream: runs.
with final as (
    select snapshot_id as version, started_at, papers, embedded, rejected, dq_outcome
    from runs
    order by snapshot_id
)

select * from final
