-- paper_digests: a digest of the paper columns that per-paper SQL reads (abstract, links),
-- the abstract as the 64-bit hash that the run's papers hold in its place
-- (flows/core/held.py).
-- grain: one row per paper_id.
-- upstream: papers.
-- A paper's cached rows are reused only while its digest is unchanged: the paper_id hashes
-- casefolded text, so the same id can come with an abstract cased differently.
-- DuckDB's 64-bit hash of the two columns (quicker than an md5 of their text); the cache
-- is kept per DuckDB version (flows/derive/paper_rows.py, PaperRows).
with final as (
    select
        paper_id,
        hash(abstract_hash, links)::varchar as digest
    from papers
)

select * from final
