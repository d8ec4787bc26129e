-- hits: what a person needs to act on each paper of a ranked list, in rank order: who
-- wrote it, where it appeared, its topic, a link to it, and how close it is to the query.
-- grain: one row per hit.
-- upstream: papers, paper_topics, topics, embeddings.
-- parameters: $ranked (list of struct(paper_id, bm25, all_words), best first: all_words
-- says the paper holds every word of the query, NULL when not asked), $query (FLOAT[]
-- unit vector of the query, NULL when it was not encoded), $min_cosine (the least cosine
-- of a good match), $min_cosine_words (the least cosine of a good match that holds every
-- word of the query).
with ranked as (
    select
        unnest($ranked, recursive := true),
        generate_subscripts($ranked, 1) as rank
),

-- The paper's own page where its id says which site has it, else a review or web link
-- from its abstract. OpenReview ids (9 to 14 letters, digits, - and _) are taken as such
-- only for records with a decision or of a venue that reviews on OpenReview.
linked as (
    select
        paper_id,
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
    from papers
    semi join ranked using (paper_id)
),

scored as (
    select
        paper_id,
        list_cosine_similarity(embedding, $query::FLOAT[])::double as cosine
    from embeddings
    semi join ranked using (paper_id)
),

final as (
    select
        ranked.rank::integer as rank,
        papers.paper_id,
        papers.title,
        papers.authors,
        papers.venue,
        papers.year,
        paper_topics.topic_id,
        topics.label as topic,
        linked.link,
        linked.code,
        round(scored.cosine, 4) as score,
        round(ranked.bm25::double, 4) as bm25,
        ranked.all_words,
        case
            when scored.cosine is null then ranked.all_words
            else scored.cosine >= $min_cosine
                or (coalesce(ranked.all_words, false) and scored.cosine >= $min_cosine_words)
        end as good_match,
        papers.abstract
    from ranked
    join papers using (paper_id)
    join linked using (paper_id)
    left join scored using (paper_id)
    left join paper_topics using (paper_id)
    left join topics using (topic_id)
    order by ranked.rank
)

select * from final
