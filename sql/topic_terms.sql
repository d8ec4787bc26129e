-- topic_terms: the most distinctive terms of every topic, by class-based TF-IDF.
-- grain: one row per (topic_id, term) among each topic's top terms.
-- upstream: paper_tokens (sql/aggregate/paper_tokens.sql: the kept words of each abstract),
-- paper_topics.
-- Terms are words and two-word phrases ("speculative decoding", "breast cancer") whose
-- words are both kept. Weight of term t in topic c: (share of c's papers that use t) *
-- ln(N / papers using t), so a term counts once per paper and words common to the whole
-- corpus fall away.
with kept as (
    select paper_topics.topic_id, paper_tokens.paper_id, paper_tokens.word, paper_tokens.position
    from paper_tokens
    join paper_topics using (paper_id)
),

vocabulary as (
    select distinct word from kept
),

-- A plural folds into its singular when both occur ("models" counts as "model").
singular as (
    select
        v.word,
        case
            when v.word like '%s' and v.word not like '%ss'
                and exists (select 1 from vocabulary s where s.word = left(v.word, -1))
            then left(v.word, -1)
            else v.word
        end as term
    from vocabulary as v
),

unigrams as (
    select kept.topic_id, kept.paper_id, kept.position, singular.term
    from kept
    join singular using (word)
),

-- Adjacent kept words of one abstract; the phrase folds its last word's plural.
bigrams as (
    select first.topic_id, first.paper_id, first.term || ' ' || second.term as term
    from unigrams as first
    join unigrams as second
        on second.paper_id = first.paper_id and second.position = first.position + 1
    where first.term <> second.term
),

paper_terms as (
    select distinct topic_id, paper_id, term from unigrams
    union
    select distinct topic_id, paper_id, term from bigrams
),

corpus as (
    select count(distinct paper_id) as n_papers from paper_topics
),

term_papers as (
    select term, count(distinct paper_id) as df from paper_terms group by all
),

topic_sizes as (
    select topic_id, count(*) as papers from paper_topics group by all
),

term_topic as (
    select topic_id, term, count(*) as docs from paper_terms group by all
),

weighted as (
    select
        term_topic.topic_id,
        term_topic.term,
        term_topic.docs,
        term_papers.df,
        term_topic.docs / topic_sizes.papers * ln(corpus.n_papers / term_papers.df) as weight
    from term_topic
    join term_papers using (term)
    join topic_sizes using (topic_id)
    cross join corpus
    -- A term carried by one abstract alone says little about a topic of several papers.
    where term_topic.docs >= least(2, topic_sizes.papers)
),

final as (
    select
        topic_id,
        term,
        docs,
        df,
        round(weight, 6) as weight,
        -- At equal weight a phrase ranks before its words: it says more.
        row_number() over (
            partition by topic_id order by weight desc, contains(term, ' ') desc, term
        ) as term_rank
    from weighted
    where weight > 0
    qualify term_rank <= getvariable('topic_terms')
)

select * from final
