-- reject_reasons: why records were turned away, per file and rule.
-- grain: one row per (file, rule). upstream: rejects.
with final as (
    select source_path, rule, count(*) as records, min(line) as first_line, any_value(reason) as example
    from rejects
    group by all
    order by source_path, records desc
)

select * from final
