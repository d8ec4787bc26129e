-- word_papers: in how many papers each kept word occurs; the vocabulary plurals fold
-- against (sql/aggregate/word_terms.sql). Not published.
-- grain: one row per word that occurs in at least one paper with a topic.
-- upstream: word_papers_before (the last run's counts, kept in the cache),
-- word_paper_changes (what each batch of changed papers gives and takes,
-- sql/aggregate/word_paper_changes.sql).
with changes as (
    select word, papers from word_papers_before
    union all
    select word, papers from word_paper_changes
),

final as (
    select word, sum(papers)::bigint as papers
    from changes
    group by word
    having sum(papers) > 0
)

select * from final
