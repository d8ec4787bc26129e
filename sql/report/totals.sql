-- totals: the headline figures of one version.
-- grain: one row.
-- upstream: papers, embeddings, topics, duplicates.
with papers_total as (
    select
        count(*) as papers,
        count(distinct (venue, year)) as venues,
        median(word_count) as median_words
    from papers
),

embedded as (
    select count(*) as embedded from embeddings
),

topics_total as (
    select count(*) as topics from topics
),

duplicates_total as (
    select count(*) as duplicates from duplicates
),

final as (
    select * from papers_total, embedded, topics_total, duplicates_total
)

select * from final
