-- word_terms: the term each kept word counts as, in the last run's corpus and in this one.
-- Not published.
-- grain: one row per word of either vocabulary.
-- upstream: word_papers_before, word_papers.
-- A plural folds into its singular when both occur ("models" counts as "model"): a paper
-- that brings the first "model" changes the terms of every paper that says "models".
with vocabulary as (
    select -1 as change, word from word_papers_before
    union all
    select 1 as change, word from word_papers
),

singular as (
    select
        v.change,
        v.word,
        case
            when v.word like '%s' and v.word not like '%ss'
                and exists (
                    select 1 from vocabulary as s
                    where s.change = v.change and s.word = left(v.word, -1)
                )
            then left(v.word, -1)
            else v.word
        end as term
    from vocabulary as v
),

final as (
    select
        word,
        any_value(term) filter (where change < 0) as term_before,
        any_value(term) filter (where change > 0) as term_after
    from singular
    group by word
)

select * from final
