-- top_mentions: the benchmarks and datasets mentioned by the most distinct papers.
-- grain: one row per mentioned name, at most getvariable('top_n') rows.
-- upstream: mentions (absent in versions published before it existed).
with named as (
    select paper_id, kind, name from mentions
    where name is not null and name <> ''
),

final as (
    select
        name,
        string_agg(distinct kind, ', ' order by kind) as kinds,
        count(distinct paper_id) as papers,
        count(*) as mentions
    from named
    group by name
    order by papers desc, mentions desc, name
    limit getvariable('top_n')
)

select * from final
