-- term_changes: what one batch of the papers whose share of the counts changes gives to
-- and takes from each topic's terms. Not published.
-- grain: one row per (topic_id, term) the batch changes (a term's rows of several batches
-- are summed by sql/aggregate/term_counts.sql).
-- upstream: changed_tokens (the kept words of one batch of papers whose share of the counts
-- changes, flows/derive/terms.py TermCounts), word_terms.
-- Terms are words and two-word phrases whose words are both kept, counted once per paper.
-- Each changed paper takes back the terms it gave with the last run's topic and folding
-- (side -1) and gives its terms now (+1); a paper that only moved to another topic does
-- both with the same terms (side 0).
with unigrams as (
    select
        changed.side,
        changed.topic_before,
        changed.topic_after,
        changed.paper_id,
        changed.position,
        case when changed.side < 0 then word_terms.term_before else word_terms.term_after end
            as term
    from changed_tokens as changed
    join word_terms using (word)
),

-- Adjacent kept words of one abstract; the phrase folds each word's plural.
bigrams as (
    select
        first.side,
        first.topic_before,
        first.topic_after,
        first.paper_id,
        first.term || ' ' || second.term as term
    from unigrams as first
    join unigrams as second
        on second.side = first.side
        and second.paper_id = first.paper_id
        and second.position = first.position + 1
    where first.term <> second.term
),

-- A word holds no space and a phrase always does: the two sets never share a row.
paper_terms as (
    select distinct side, topic_before, topic_after, paper_id, term from unigrams
    union all
    select distinct side, topic_before, topic_after, paper_id, term from bigrams
),

changes as (
    select topic_id, term, sum(change) as docs
    from (
        select topic_before as topic_id, term, -1 as change from paper_terms where side <= 0
        union all
        select topic_after as topic_id, term, 1 as change from paper_terms where side >= 0
    )
    group by all
)

select * from changes
