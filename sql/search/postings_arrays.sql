-- postings arrays: the postings table (postings.sql) in the order it was written, term
-- then paper, as flows/read/postings.py keeps it beside the keyword index for a long-lived
-- search (it checks the order as it reads, rather than sorting every posting again).
-- grain: one row per (term, paper holding it).
-- upstream: postings, in the version's search index file.
with final as (
    select termid, docid::INTEGER as docid, part
    from postings
)

select * from final
