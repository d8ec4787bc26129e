-- postings arrays: the postings table (postings.sql) in its order, term then paper, as
-- flows/read/postings.py keeps it beside the keyword index for a long-lived search.
-- grain: one row per (term, paper holding it).
-- upstream: postings, in the version's search index file.
with final as (
    select docid::INTEGER as docid, part
    from postings
    order by termid, docid
)

select * from final
