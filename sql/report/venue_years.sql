-- venue_years: papers per venue and year with abstract length and code figures.
-- grain: one row per (venue, year).
-- upstream: venue_stats.
with stats as (
    select venue, year, papers, mean_words, papers_with_code from venue_stats
),

final as (
    select * from stats
    order by papers desc, venue, year
)

select * from final
