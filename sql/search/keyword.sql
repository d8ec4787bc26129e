-- keyword search: BM25 over each paper's title and abstract (DuckDB full-text index), and
-- whether the paper holds every term of the query (conjunctive mode), in one pass.
-- grain: one row per paper with a BM25 score, best first.
-- upstream: docs and its fts_main_docs index, in the version's search index file.
-- parameters: $text (the query), $terms (its terms, from terms.sql; NULL: none), $ids
-- (the papers that may be returned, from flows/read/ranking.py's filters; NULL for all).
-- $terms is a parameter, not a CTE here: the index's match macro runs once per paper
-- when its query comes from a column.
with scored as (
    select
        paper_id,
        fts_main_docs.match_bm25(paper_id, $text) as score,
        $terms is not null
        and fts_main_docs.match_bm25(paper_id, $terms, conjunctive := 1) is not null
        as all_words
    from docs
    where $ids is null or paper_id in (select unnest($ids::VARCHAR[]))
),

final as (
    select paper_id, score, all_words
    from scored
    where score is not null
    order by score desc, paper_id
)

select * from final
