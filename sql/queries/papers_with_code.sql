-- papers_with_code: papers that link a code repository, with the link.
-- grain: one row per (paper, code link). upstream: mentions, papers.
with code as (
    select paper_id, name as url from mentions where kind = 'code'
),

final as (
    select code.paper_id, papers.venue, papers.year, code.url, left(papers.abstract, 120) as opening
    from code
    join papers using (paper_id)
    order by code.paper_id, code.url
)

select * from final
