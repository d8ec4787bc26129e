-- facets: what the search filters offer: each venue and year with its papers.
-- grain: one row per (facet, value), most papers first.
-- upstream: papers.
with venues as (
    select 'venue' as facet, venue as value, count(*) as papers
    from papers
    where venue is not null
    group by venue
),

years as (
    select 'year' as facet, year::varchar as value, count(*) as papers
    from papers
    where year is not null
    group by year
),

final as (
    select * from venues
    union all
    select * from years
    order by facet, papers desc, value desc
)

select * from final
