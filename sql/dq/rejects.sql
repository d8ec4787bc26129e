-- rejects: the rejected records the data-quality page lists, by file and then rule: the
-- first $per_rule records of each file's rule (by record number), $shown in all, each with
-- how many its file and rule have and how many the run rejected in all.
-- grain: one row per listed rejected record.
-- upstream: rejects.
with numbered as (
    select
        source_path,
        record_no,
        line,
        rule,
        reason,
        raw_snippet,
        row_number() over (partition by source_path, rule order by record_no) as nth,
        count(*) over (partition by source_path, rule) as of_rule,
        count(*) over () as total
    from rejects
),

final as (
    select * from numbered
    where nth <= $per_rule
    order by source_path, rule, record_no
    limit $shown
)

select * from final
