-- word_papers: in how many papers each kept word occurs; the vocabulary plurals fold
-- against (sql/aggregate/word_terms.sql). Not published.
-- grain: one row per word that occurs in at least one paper with a topic.
-- upstream: word_papers_before (the last run's counts, kept in the cache), changed_tokens
-- (the kept words of papers whose share of the counts changes, flows/derive/terms.py
-- TermCounts).
-- A paper that left or whose text changed takes its words back (side -1), a paper that
-- came or was rewritten adds them (+1); a paper read again only because its topic
-- changed (side 0) keeps its words.
with paper_words as (
    select distinct side, paper_id, word
    from changed_tokens
    where side <> 0
),

changes as (
    select word, papers from word_papers_before
    union all
    select word, side as papers from paper_words
),

final as (
    select word, sum(papers)::bigint as papers
    from changes
    group by word
    having sum(papers) > 0
)

select * from final
