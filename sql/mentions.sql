-- mentions: Benchmarks, datasets, metrics and links named by each paper.
-- grain: one row per (paper_id, kind, name).
-- key: paper_id, kind, name
-- reads: papers, mention_vocabulary
-- references: paper_id -> papers
-- columns:
--   paper_id: the paper
--   kind: benchmark, dataset, metric, code or review
--   name: what is named (or the link)
--   value: a number reported with it, if any
--   context: the words around it
-- A metric carries the number reported next to it where one follows ("FID of 1.02").
-- mention_vocabulary is sql/seeds/mentions.csv (name, kind, RE2 pattern); the macros are those
-- of sql/macros/mentions.sql. getvariable('mention_pattern') is every pattern in one
-- alternation: one pass over each abstract finds all candidate names, instead of one pass per
-- pattern.
with found as (
    select distinct
        paper_id,
        unnest(regexp_extract_all(abstract, getvariable('mention_pattern'))) as token
    from papers
),

tokens as (
    select distinct token from found
),

token_names as (
    select tokens.token, vocabulary.name, vocabulary.kind, vocabulary.pattern
    from tokens
    join mention_vocabulary as vocabulary
        on regexp_full_match(tokens.token, vocabulary.pattern)
),

named as (
    select distinct found.paper_id, token_names.kind, token_names.name, token_names.pattern
    from found
    join token_names using (token)
),

described as (
    select
        named.paper_id,
        named.kind,
        named.name,
        case
            when named.kind = 'metric'
                then nullif(mention_value(named.pattern, papers.abstract), '')
        end as value,
        mention_context(named.pattern, papers.abstract) as context
    from named
    join papers using (paper_id)
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
    select * from described
    union all
    select * from linked
)

select * from final
order by paper_id, kind, name
