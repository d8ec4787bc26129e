-- topic_sizes: papers per topic, with each topic's label and top terms.
-- grain: one row per topic_id (topics with no papers included, at zero).
-- upstream: topics, paper_topics.
with members as (
    select topic_id, count(distinct paper_id) as papers
    from paper_topics
    group by all
),

final as (
    select
        topics.topic_id,
        topics.label,
        coalesce(members.papers, 0) as papers,
        array_to_string(topics.top_terms[1:8], ', ') as top_terms
    from topics
    left join members using (topic_id)
    order by papers desc, topics.topic_id
)

select * from final
