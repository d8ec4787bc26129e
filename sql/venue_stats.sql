-- venue_stats: Per venue and year: papers, words, code and topics.
-- grain: one row per (venue, year).
-- key: venue, year
-- reads: papers, paper_topics
-- columns:
--   venue: venue
--   year: year
--   papers: papers
--   mean_words: mean abstract words
--   min_words: fewest
--   max_words: most
--   papers_with_code: papers with a code link
--   topics: topics they fall in
with per_paper as (
    select
        papers.venue,
        papers.year,
        papers.paper_id,
        papers.word_count,
        len(list_filter(papers.links, l -> l.kind = 'code')) > 0 as has_code,
        paper_topics.topic_id
    from papers
    left join paper_topics using (paper_id)
),

final as (
    select
        venue,
        year,
        count(*) as papers,
        round(avg(word_count), 1) as mean_words,
        min(word_count) as min_words,
        max(word_count) as max_words,
        count(*) filter (where has_code) as papers_with_code,
        count(distinct topic_id) as topics
    from per_paper
    group by all
    order by venue, year
)

select * from final
