-- cards: what a person needs to act on each paper a search lists: who wrote it, where it
-- appeared, its topic and a link to it (flows/read/hits.py adds the scores and the rank).
-- grain: one row per paper_id of $ids (NULL: every paper).
-- upstream: papers, paper_topics, topics.
-- parameters: $ids (VARCHAR[] of paper ids, or NULL for all).
-- $ids is a search's hits (k of them): list_contains, not `in (select unnest(...))`,
-- whose semi join reads more of the table (list_contains scans the list for each paper:
-- no use for long lists).
with asked as (
    select *
    from papers
    where $ids is null or list_contains($ids::VARCHAR[], paper_id)
),

-- The paper's own page where its id says which site has it, else a review or web link
-- from its abstract. OpenReview ids (9 to 14 letters, digits, - and _) are taken as such
-- only for records with a decision or of a venue that reviews on OpenReview.
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
            when regexp_full_match(external_id, '[A-Za-z0-9_-]{9,14}')
                and regexp_matches(external_id, '[A-Za-z]')
                and (decision is not null or venue in ('ICLR', 'NeurIPS', 'TMLR', 'COLM'))
                then 'https://openreview.net/forum?id=' || external_id
            else coalesce(
                list_filter(links, lambda l: l.kind = 'review')[1].url,
                list_filter(links, lambda l: l.kind = 'web')[1].url
            )
        end as link,
        list_filter(links, lambda l: l.kind = 'code')[1].url as code
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
        linked.abstract
    from linked
    left join paper_topics using (paper_id)
    left join topics using (topic_id)
)

select * from final
