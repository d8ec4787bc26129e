-- keyword search: the $k papers of best BM25 over their title and abstract, read from the
-- postings of the query's terms (postings.sql), with the scores DuckDB's match_bm25 gives.
-- grain: one row per paper, best first (ties by paper_id), at most $k.
-- upstream: postings, fts_main_docs.dict and docs, in the version's search index file.
-- parameters: $text (the query), $k (hits), $ids (the papers that may be returned, from
-- flows/read/ranking.py's filters; NULL for all).
with tokens as (
    select distinct stem(unnest(fts_main_docs.tokenize($text)), 'porter') as term
),

asked as (
    select dict.termid
    from fts_main_docs.dict as dict
    join tokens using (term)
),

scored as (
    select postings.docid, sum(postings.part) as score
    from postings
    semi join asked using (termid)
    group by postings.docid
),

final as (
    select docs.name as paper_id, scored.score
    from scored
    join fts_main_docs.docs as docs using (docid)
    where $ids is null or docs.name in (select unnest($ids::VARCHAR[]))
    order by scored.score desc, paper_id
    limit $k
)

select * from final
