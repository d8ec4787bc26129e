-- paper: one paper as its page shows it: every field, its topic, its place on the map.
-- grain: one row (none when $paper_id is not in the version).
-- upstream: papers, paper_topics, topics, paper_coordinates; macros paper_title,
-- paper_untitled.
with paper as (
    select * from papers where paper_id = $paper_id
),

final as (
    select
        paper.paper_id,
        paper_title(paper.title, paper.abstract) as title,
        paper_untitled(paper.title) as untitled,
        paper.authors,
        paper.venue,
        paper.year,
        paper.external_id,
        paper.decision,
        paper.keywords,
        paper.categories,
        paper.abstract,
        paper.word_count,
        paper.links,
        paper.flags,
        paper.n_locations,
        paper_topics.topic_id,
        topics.label as topic,
        round(1 - paper_topics.distance, 4) as topic_similarity,
        paper_coordinates.x,
        paper_coordinates.y
    from paper
    left join paper_topics using (paper_id)
    left join topics using (topic_id)
    left join paper_coordinates using (paper_id)
)

select * from final
