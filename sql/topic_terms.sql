-- topic_terms: The most distinctive terms of every topic (class-based TF-IDF).
-- grain: one row per (topic_id, term) among each topic's top terms.
-- key: topic_id, term
-- reads: term_counts, paper_topics
-- references: topic_id -> topics
-- columns:
--   topic_id: the topic
--   term: a term
--   docs: papers of the topic using it
--   df: papers using it overall
--   weight: c-TF-IDF weight
--   term_rank: 1 = most distinctive
-- term_counts (sql/aggregate/term_counts.sql) holds the papers of each topic using each
-- term, kept up to date from the papers that changed.
-- Terms are words and two-word phrases ("speculative decoding", "breast cancer") whose
-- words are both kept. Weight of term t in topic c: (share of c's papers that use t) *
-- ln(N / papers using t), so a term counts once per paper and words common to the whole
-- corpus fall away.
with corpus as (
    select count(distinct paper_id) as n_papers from paper_topics
),

-- A paper has one topic, so the papers using a term add up over the topics.
term_papers as (
    select term, sum(docs)::bigint as df from term_counts group by all
),

topic_sizes as (
    select topic_id, count(*) as papers from paper_topics group by all
),

weighted as (
    select
        term_counts.topic_id,
        term_counts.term,
        term_counts.docs,
        term_papers.df,
        term_counts.docs / topic_sizes.papers * ln(corpus.n_papers / term_papers.df) as weight
    from term_counts
    join term_papers using (term)
    join topic_sizes using (topic_id)
    cross join corpus
    -- A term carried by one abstract alone says little about a topic of several papers.
    where term_counts.docs >= least(2, topic_sizes.papers)
),

-- A topic's top terms weigh at least its topic_terms-th heaviest: only those are ranked
-- (of 713,000 weighted rows at 100,000 papers, about 2,400).
floors as (
    select topic_id, list_min(max(weight, getvariable('topic_terms'))) as floor
    from weighted
    where weight > 0
    group by topic_id
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
    join floors using (topic_id)
    where weight > 0 and round(weight, 6) >= round(floors.floor, 6)
    qualify term_rank <= getvariable('topic_terms')
)

select * from final
