-- most_used_benchmarks: benchmarks and datasets by the number of papers that name them.
-- grain: one row per benchmark or dataset. upstream: mentions.
with named as (
    select name, kind, count(distinct paper_id) as papers
    from mentions
    where kind in ('benchmark', 'dataset')
    group by all
),

final as (
    select * from named order by papers desc, name
)

select * from final
