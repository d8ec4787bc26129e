-- all terms: which of some papers hold every term of the query, by the version's
-- full-text index in conjunctive mode.
-- grain: one row per paper_id that holds them all.
-- upstream: docs, its fts_main_docs index and stop words, in the version's search index
-- file.
-- parameters: $text (the query), $ids (the papers asked about).
-- The query's stop words are dropped first (split as the index splits text): conjunctive
-- mode counts them as terms that no paper holds ("chain of thought" matched nothing).
with words as (
    select unnest(string_split_regex(lower($text), '(\.|[^a-z])+')) as word
),

terms as (
    select string_agg(word, ' ') as query
    from words
    where word <> '' and word not in (select sw from fts_main_docs.stopwords)
),

asked as (
    select paper_id
    from docs
    where paper_id in (select unnest($ids::VARCHAR[]))
),

final as (
    select asked.paper_id
    from asked, terms
    where terms.query is not null
      and fts_main_docs.match_bm25(asked.paper_id, terms.query, conjunctive := 1) is not null
)

select * from final
