-- terms: the words of a query that the all-words test asks every one of (all_words.sql),
-- split as the index splits text, stop words dropped: conjunctive mode counts a stop word
-- as a term that no paper holds ("chain of thought" matched nothing).
-- grain: one row: the terms joined by spaces (NULL when the query has none).
-- upstream: the stop words of the version's search index file.
-- parameters: $text (the query).
with words as (
    select unnest(string_split_regex(lower($text), '(\.|[^a-z])+')) as word
),

final as (
    select string_agg(word, ' ') as query
    from words
    where word <> '' and word not in (select sw from fts_main_docs.stopwords)
)

select * from final
