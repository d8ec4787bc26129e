-- cards: what a person needs to act on each paper a search lists: who wrote it, where it
-- appeared, its topic and a link to it (flows/read/hits.py adds the scores and the rank).
-- grain: one row per paper_id of $ids (NULL: every paper).
-- upstream: papers, paper_topics, topics.
-- parameters: $ids (VARCHAR[] of paper ids, or NULL for all).
-- $ids is a search's hits (k of them): list_contains, not `in (select unnest(...))`,
-- whose semi join reads more of the table (list_contains scans the list for each paper:
-- no use for long lists).
-- Versions published before papers had id_field read it as NULL (union by name).
with asked as (
    select *
    from papers
    where $ids is null or list_contains($ids::VARCHAR[], paper_id)
    union all by name
    select null::VARCHAR as id_field
    where false
),

-- The paper's own page where its id says which site has it, else a review or web link
-- from its abstract. A link is made only where the id's scheme is certain: a DOI or an
-- arXiv id by its form; a PubMed id by the column it was read from (id_field `pmid`); an
-- OpenReview id (9 to 14 letters, digits, - and _; an upper-case letter, or a digit and
-- no dash; not a name such as nips23-x2) only for records with a decision or of a venue
-- that reviews on OpenReview. No link is better than a wrong one.
linked as (
    select
        *,
        case
            when regexp_full_match(external_id, '10\.\d{4,9}/\S+')
                then 'https://doi.org/' || external_id
            when regexp_full_match(
                external_id, '(arXiv:)?(\d{4}\.\d{4,5}|[a-z-]+(\.[A-Z]{2})?/\d{7})(v\d+)?'
            )
                then 'https://arxiv.org/abs/' || regexp_replace(external_id, '^arXiv:', '')
            when lower(id_field) = 'pmid' and regexp_full_match(external_id, '\d{1,9}')
                then 'https://pubmed.ncbi.nlm.nih.gov/' || external_id || '/'
            when regexp_full_match(external_id, '[A-Za-z0-9_-]{9,14}')
                and (
                    regexp_matches(external_id, '[A-Z]')
                    or (regexp_matches(external_id, '[0-9]') and not contains(external_id, '-'))
                )
                and not regexp_matches(external_id, '^[a-z]+[0-9]{2,4}[-_]')
                and (decision is not null or venue in ('ICLR', 'NeurIPS', 'TMLR', 'COLM'))
                then 'https://openreview.net/forum?id=' || external_id
            else coalesce(
                list_filter(links, lambda l: l.kind = 'review')[1].url,
                list_filter(links, lambda l: l.kind = 'web')[1].url
            )
        end as link,
        list_filter(links, lambda l: l.kind = 'code')[1].url as code,
        -- A bare code (OpenReview exports write 0, 2, -1) is labelled as a decision; the
        -- export says nothing of what each code means, so no meaning is made up.
        case
            when regexp_full_match(decision, '[+-]?\d+') then 'decision ' || decision
            else decision
        end as decision_text
    from asked
),

final as (
    select
        linked.paper_id,
        linked.title,
        linked.authors,
        linked.venue,
        linked.year,
        paper_topics.topic_id,
        topics.label as topic,
        linked.link,
        linked.code,
        linked.decision_text as decision,
        linked.abstract
    from linked
    left join paper_topics using (paper_id)
    left join topics using (topic_id)
)

select * from final
