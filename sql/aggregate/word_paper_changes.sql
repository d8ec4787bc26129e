-- word_paper_changes: how many papers each kept word gains or loses in one batch of the
-- papers whose share of the counts changes. Not published.
-- grain: one row per word of the batch's changed papers (a word's rows of several batches
-- are summed by sql/aggregate/word_papers.sql).
-- upstream: changed_tokens (the kept words of one batch of papers whose share of the counts
-- changes, flows/derive/terms.py TermCounts).
-- A paper that left or whose text changed takes its words back (side -1), a paper that
-- came or was rewritten adds them (+1); a paper read again only because its topic
-- changed (side 0) keeps its words.
with paper_words as (
    select distinct side, paper_id, word
    from changed_tokens
    where side <> 0
),

final as (
    select word, sum(side)::bigint as papers
    from paper_words
    group by word
)

select * from final
