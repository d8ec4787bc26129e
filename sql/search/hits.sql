-- hits: the papers behind a ranked list of ids, with their score, in rank order.
-- grain: one row per hit.
-- upstream: papers; $ranked (list of struct(paper_id, score)).
-- parameters: $venue and $year (NULL for any).
with ranked as (
    select
        unnest($ranked, recursive := true),
        generate_subscripts($ranked, 1) as rank
),

final as (
    select
        papers.paper_id,
        papers.title,
        papers.venue,
        papers.year,
        round(ranked.score::double, 4) as score,
        papers.abstract
    from ranked
    join papers using (paper_id)
    where ($venue is null or lower(papers.venue) = lower($venue))
      and ($year is null or papers.year = $year)
    order by ranked.rank
)

select * from final
