-- keyword search: the $k papers of best BM25 over their title and abstract, read from the
-- postings of the query's terms (postings.sql), with the scores DuckDB's match_bm25 gives.
-- grain: one row per paper, best first (ties by paper_id), at most $k.
-- upstream: postings, fts_main_docs.dict and docs, in the version's search index file.
-- parameters: $text (the query), $k (hits), $ids (the papers that may be returned, from
-- flows/read/ranking.py's filters; NULL for all).
-- Names are joined to the best only: the papers scoring at least the k-th best score (its
-- ties kept, so that ties go by paper_id as they would over all). A score is rounded to
-- 9 decimals: a sum of doubles differs in its last bits with the order it is added in
-- (DuckDB's threads), and papers of equal parts then tie, and go by paper_id, whatever
-- the order (flows/read/postings.py sums the same parts in another).
with tokens as (
    select distinct stem(unnest(fts_main_docs.tokenize($text)), 'porter') as term
),

asked as (
    select dict.termid
    from fts_main_docs.dict as dict
    join tokens using (term)
),

allowed as (
    select docid
    from fts_main_docs.docs
    where name in (select unnest($ids::VARCHAR[]))
),

scored as (
    select postings.docid, round(sum(postings.part), 9) as score
    from postings
    semi join asked using (termid)
    where $ids is null or postings.docid in (select docid from allowed)
    group by postings.docid
),

cutoff as (
    select min(score) as least
    from (select score from scored order by score desc limit $k)
),

final as (
    select docs.name as paper_id, scored.score
    from scored
    join fts_main_docs.docs as docs using (docid)
    where scored.score >= (select least from cutoff)
    order by scored.score desc, paper_id
    limit $k
)

select * from final
