-- topics: one row per topic with its size, a label from its most distinctive terms, and
-- its centroid (matched against the next version's topics to keep ids stable).
-- grain: one row per topic_id.
-- upstream: paper_topics, topic_terms, topic_centroids.
with sizes as (
    select topic_id, count(*) as papers, round(avg(distance), 6) as mean_distance
    from paper_topics
    group by all
),

terms as (
    select
        topic_id,
        list(term order by term_rank) as top_terms
    from topic_terms
    group by all
),

final as (
    select
        sizes.topic_id,
        array_to_string(coalesce(terms.top_terms, [])[1:3], ', ') as label,
        sizes.papers,
        sizes.mean_distance,
        coalesce(terms.top_terms, []) as top_terms,
        topic_centroids.centroid
    from sizes
    left join terms using (topic_id)
    left join topic_centroids using (topic_id)
    order by sizes.topic_id
)

select * from final
