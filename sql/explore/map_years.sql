-- map_years: the years the map can colour by, oldest first, each with its papers.
-- grain: one row per year.
-- upstream: papers.
with final as (
    select year as value, count(*) as papers
    from papers
    where year is not null
    group by year
    order by year
)

select * from final
