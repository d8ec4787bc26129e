-- term_counts: in how many papers of each topic every term occurs. Not published.
-- grain: one row per (topic_id, term) used by at least one paper of the topic.
-- upstream: term_counts_before (the last run's counts, kept in the cache), term_changes
-- (what each batch of changed papers gives and takes, sql/aggregate/term_changes.sql).
-- A run reads the papers that changed only.
with changes as (
    select topic_id, term, sum(docs) as docs
    from term_changes
    group by all
),

final as (
    select
        topic_id,
        term,
        (coalesce(before.docs, 0) + coalesce(changes.docs, 0))::bigint as docs
    from term_counts_before as before
    full join changes using (topic_id, term)
    where coalesce(before.docs, 0) + coalesce(changes.docs, 0) > 0
)

select * from final
