-- group_changes: papers per venue/year and per topic at two versions, side by side.
-- grain: one row per (dimension, group) present at either version.
-- upstream: papers, paper_topics, topics at getvariable('version_a') and ('version_b').
-- A topic is named by its id and its label at the newer version.
with venues_a as (
    select venue || ' ' || coalesce(year::varchar, '?') as grp, count(*) as papers
    from papers at (version => getvariable('version_a'))
    group by all
),

venues_b as (
    select venue || ' ' || coalesce(year::varchar, '?') as grp, count(*) as papers
    from papers at (version => getvariable('version_b'))
    group by all
),

topics_a as (
    select pt.topic_id, any_value(t.label) as label, count(*) as papers
    from paper_topics as pt at (version => getvariable('version_a'))
    join topics as t at (version => getvariable('version_a')) using (topic_id)
    group by all
),

topics_b as (
    select pt.topic_id, any_value(t.label) as label, count(*) as papers
    from paper_topics as pt at (version => getvariable('version_b'))
    join topics as t at (version => getvariable('version_b')) using (topic_id)
    group by all
),

venues as (
    select 'venue' as dimension, grp, a.papers as papers_a, b.papers as papers_b
    from venues_a as a full join venues_b as b using (grp)
),

-- Topic ids persist across versions where a topic does, so topics pair up by id.
topics as (
    select
        'topic' as dimension,
        coalesce(b.topic_id, a.topic_id) || ': ' || coalesce(b.label, a.label) as grp,
        a.papers as papers_a,
        b.papers as papers_b
    from topics_a as a full join topics_b as b using (topic_id)
),

final as (
    select
        dimension,
        grp as "group",
        coalesce(papers_a, 0) as papers_a,
        coalesce(papers_b, 0) as papers_b,
        coalesce(papers_b, 0) - coalesce(papers_a, 0) as delta
    from (select * from venues union all select * from topics)
)

select * from final
order by dimension desc, papers_b desc, "group"
