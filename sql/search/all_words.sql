-- all words: which of some papers hold every term of a query (conjunctive mode), as
-- match_bm25(..., conjunctive := 1) tells it: a term no paper holds is held by none.
-- grain: one row per paper of $ids that holds every term.
-- upstream: postings, fts_main_docs.dict and docs, in the version's search index file.
-- parameters: $terms (the query's terms, from terms.sql; NULL: none, so no paper), $ids
-- (the papers asked about: a search's hits).
with tokens as (
    select distinct stem(unnest(fts_main_docs.tokenize($terms)), 'porter') as term
),

asked as (
    select dict.termid
    from fts_main_docs.dict as dict
    join tokens using (term)
),

papers as (
    select docid, name as paper_id
    from fts_main_docs.docs
    where name in (select unnest($ids::VARCHAR[]))
),

final as (
    select papers.paper_id
    from postings
    join papers using (docid)
    semi join asked using (termid)
    group by papers.paper_id
    having count(distinct postings.termid) = (select count(*) from tokens)
)

select * from final
