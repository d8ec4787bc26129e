-- topic_papers: the papers of a topic, closest to its centre first.
-- grain: one row per paper of $topic_id.
-- upstream: paper_topics.
with final as (
    select paper_id, round(1 - distance, 4) as score
    from paper_topics
    where topic_id = $topic_id
    order by distance, paper_id
)

select * from final
