-- postings: each term's papers with the term's BM25 part in each, kept in the keyword
-- index file beside DuckDB's full-text index (fts_main_docs), sorted by term so that a
-- query reads only the rows of its own terms (the index's match_bm25 macro reads every
-- occurrence of every term once per query: 2.5 s at a million papers).
-- grain: one row per (term, paper holding it).
-- upstream: fts_main_docs.terms, docs, dict, stats (pragma create_fts_index).
-- The part is match_bm25's: idf (its log is base 10, as the macro's) times the saturated
-- term frequency, k1 = 1.2 and b = 0.75, the macro's defaults; a paper's score is the sum
-- of its parts over the query's terms, as the macro sums them.
with occurrences as (
    select termid, docid, count(*) as tf
    from fts_main_docs.terms
    group by termid, docid
),

final as (
    select
        occurrences.termid,
        occurrences.docid,
        log((stats.num_docs - dict.df + 0.5) / (dict.df + 0.5) + 1)
        * (occurrences.tf * (1.2 + 1))
        / (occurrences.tf + 1.2 * (1 - 0.75 + 0.75 * (docs.len / stats.avgdl))) as part
    from occurrences
    join fts_main_docs.dict as dict using (termid)
    join fts_main_docs.docs as docs using (docid)
    cross join fts_main_docs.stats as stats
    order by occurrences.termid, occurrences.docid
)

select * from final
