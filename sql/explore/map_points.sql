-- map_points: the map's papers column by column, as /api/map sends them: one list per
-- column, each in paper_id order (a paper's id, its place rounded to 4 digits, its topic,
-- its venue as the venue's rank and its year), and what the map can colour by besides
-- topics: each venue (most papers first, then by name: a paper's venue is its rank here,
-- from 0) and each year (oldest first), with its papers.
-- grain: one row: the whole map.
-- upstream: paper_coordinates, paper_topics, papers.
with venues as (
    select
        venue,
        count(*) as papers,
        row_number() over (order by count(*) desc, venue) - 1 as venue_rank
    from papers
    where venue is not null
    group by venue
),

years as (
    select year, count(*) as papers
    from papers
    where year is not null
    group by year
),

placed as (
    select
        paper_coordinates.paper_id,
        round(paper_coordinates.x, 4) as x,
        round(paper_coordinates.y, 4) as y,
        paper_topics.topic_id,
        venues.venue_rank,
        papers.year
    from paper_coordinates
    join papers using (paper_id)
    left join paper_topics using (paper_id)
    left join venues using (venue)
),

points as (
    select
        count(*) as papers,
        list(paper_id order by paper_id) as paper_id,
        list(x order by paper_id) as x,
        list(y order by paper_id) as y,
        list(topic_id order by paper_id) as topic_id,
        list(venue_rank order by paper_id) as venue,
        list(year order by paper_id) as year
    from placed
),

final as (
    select
        points.*,
        (select list({'value': venue, 'papers': papers} order by venue_rank) from venues)
            as venues,
        (select list({'value': year, 'papers': papers} order by year) from years) as years
    from points
)

select * from final
