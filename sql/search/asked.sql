-- asked: the terms of a query as the keyword index knows them, for the search that scores
-- the index's postings in memory (flows/read/postings.py): split and stemmed as keyword.sql
-- and all_words.sql split them.
-- grain: one row: the termids of the query's distinct terms that the index holds (a list,
-- NULL for none) and the count of its distinct terms (known or not).
-- upstream: fts_main_docs.dict, in the version's search index file.
-- parameters: $text (the query, or terms.sql's terms for the all-words test).
with tokens as (
    select distinct stem(unnest(fts_main_docs.tokenize($text)), 'porter') as term
),

final as (
    select
        (select list(dict.termid order by dict.termid)
         from fts_main_docs.dict as dict join tokens using (term)) as termids,
        (select count(*) from tokens) as tokens
)

select * from final
