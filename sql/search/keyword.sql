-- keyword search: BM25 over each paper's title and abstract (DuckDB full-text index).
-- grain: one row per hit, best first.
-- upstream: docs and its fts_main_docs index, in the version's search index file.
-- parameters: $text (the query), $k (hits), $ids (the papers that may be returned, from
-- filtered.sql; NULL for all).
with scored as (
    select paper_id, fts_main_docs.match_bm25(paper_id, $text) as score
    from docs
    where $ids is null or paper_id in (select unnest($ids::VARCHAR[]))
),

final as (
    select paper_id, score
    from scored
    where score is not null
    order by score desc, paper_id
    limit $k
)

select * from final
