-- map_venues: the venues the map can colour by, in the order the map gives them: most
-- papers first, then by name (a paper's venue on the map is its venue's place here, from 0).
-- grain: one row per venue.
-- upstream: papers.
with final as (
    select venue as value, count(*) as papers
    from papers
    where venue is not null
    group by venue
    order by papers desc, venue
)

select * from final
