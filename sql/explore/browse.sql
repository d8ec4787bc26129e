-- browse: the papers that pass the filters given (none: every paper), in the order asked, a
-- page at a time, with how many pass in all and how many of them share each one's year.
-- grain: one row per paper of the page ($offset, $limit), in order.
-- upstream: papers, paper_topics, authors; macros paper_title, paper_untitled.
-- parameters: $venue (case ignored), $year, $topic (a topic_id), $author (an author_key),
-- each NULL for any; $sort: year (newest first), title (A to Z, titled papers first) or
-- centre (closest to its topic's centre first); $offset, $limit.
with by_author as (
    select unnest(paper_ids) as paper_id
    from authors
    where author_key = $author
),

passing as (
    select
        papers.paper_id,
        papers.year,
        paper_untitled(papers.title) as untitled,
        lower(paper_title(papers.title, papers.abstract)) as name,
        paper_topics.distance
    from papers
    left join paper_topics using (paper_id)
    where
        ($venue is null or lower(papers.venue) = lower($venue))
        and ($year is null or papers.year = $year)
        and ($topic is null or paper_topics.topic_id = $topic)
        and ($author is null or papers.paper_id in (select paper_id from by_author))
),

counted as (
    select
        *,
        count(*) over () as total,
        count(*) over (partition by year) as year_papers
    from passing
),

final as (
    select
        paper_id,
        round(1 - distance, 4) as score,
        year,
        year_papers,
        total
    from counted
    order by
        if($sort = 'year', year, null) desc nulls last,
        if($sort = 'centre', distance, null) asc nulls last,
        untitled,
        name,
        paper_id
    limit $limit offset $offset
)

select * from final
