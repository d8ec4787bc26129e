-- run_lock_holder: who holds paperlake's advisory lock on this catalog, and since when.
-- grain: one row, the session granted the lock (classid, objid) given; none if free.
-- upstream: PostgreSQL's pg_locks and pg_stat_activity. The holder set application_name to
-- "pid N on host H"; query_start is when its last statement, the lock it took, ran.
with granted as (
    select pid
    from pg_locks
    where locktype = 'advisory'
        and granted
        and objsubid = 2
        and classid = %s::bigint::oid
        and objid = %s::bigint::oid
        and database = (select oid from pg_database where datname = current_database())
),

final as (
    select
        activity.application_name as holder,
        activity.query_start as since
    from granted
    inner join pg_stat_activity as activity using (pid)
)

select * from final
