-- venue: a venue's papers per year as the venue page counts them, newest year first.
-- grain: one row per year of $venue (none when no paper has it).
-- upstream: venue_stats.
with final as (
    select year, papers, papers_with_code, topics, mean_words
    from venue_stats
    where venue = $venue
    order by year desc nulls last
)

select * from final
