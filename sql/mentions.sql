-- mentions: benchmarks, datasets and metrics named in abstracts, code and review links.
-- grain: one row per (paper_id, kind, name); a metric carries the number reported next to
-- it where one follows ("FID of 1.02").
-- upstream: papers, mention_vocabulary (sql/seeds/mentions.csv: name, kind, RE2 pattern).
with named as (
    select
        papers.paper_id,
        vocabulary.kind,
        vocabulary.name,
        case
            when vocabulary.kind = 'metric' then nullif(
                regexp_extract(
                    papers.abstract,
                    '(?:' || vocabulary.pattern || ')\s*(?:score\s+)?(?:of|=|:|at|to|is)?\s*'
                    || '([0-9]+(?:\.[0-9]+)?%?)',
                    1
                ),
                ''
            )
        end as value,
        regexp_extract(papers.abstract, '.{0,60}(?:' || vocabulary.pattern || ').{0,60}', 0)
            as context
    from papers
    join mention_vocabulary as vocabulary
        on regexp_matches(papers.abstract, vocabulary.pattern)
),

linked as (
    select distinct
        papers.paper_id,
        link.kind,
        link.url as name,
        null::varchar as value,
        null::varchar as context
    from papers, unnest(papers.links) as t(link)
    where link.kind in ('code', 'review')
),

final as (
    select * from named
    union all
    select * from linked
)

select * from final
order by paper_id, kind, name
