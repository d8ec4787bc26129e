-- author: an author as the author page heads it: the name, its spellings, how many papers
-- and in which venues and years.
-- grain: one row (none when $author_key is no author of the version).
-- upstream: authors.
with final as (
    select author_key, name, spellings, papers, venues, years, paper_ids
    from authors
    where author_key = $author_key
)

select * from final
