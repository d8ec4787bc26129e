-- filtered: the papers a search may return, by venue, year and topic.
-- grain: one row per paper_id.
-- upstream: papers, paper_topics, topics.
-- parameters: $venue and $year (NULL for any), $topic (NULL for any; a topic id, or
-- words found in its label, case ignored).
with labelled as (
    select
        papers.paper_id,
        papers.venue,
        papers.year,
        paper_topics.topic_id,
        topics.label
    from papers
    left join paper_topics using (paper_id)
    left join topics using (topic_id)
),

final as (
    select paper_id
    from labelled
    where ($venue is null or lower(venue) = lower($venue))
      and ($year is null or year = $year)
      and (
          $topic is null
          or topic_id::varchar = trim($topic)
          or contains(lower(label), lower(trim($topic)))
      )
)

select * from final
