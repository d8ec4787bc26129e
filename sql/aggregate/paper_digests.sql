-- paper_digests: a digest of the paper columns that per-paper SQL reads (abstract, links).
-- grain: one row per paper_id.
-- upstream: papers.
-- A paper's cached rows are reused only while its digest is unchanged: the paper_id hashes
-- casefolded text, so the same id can come with an abstract cased differently.
with final as (
    select
        paper_id,
        md5(coalesce(abstract, '') || chr(0) || coalesce(links::varchar, '')) as digest
    from papers
)

select * from final
