-- files: the per-file ingest figures of the run: records seen, accepted and rejected (by
-- rule), flags, and the file's error or warning.
-- grain: one row per raw file version the run read.
-- upstream: sources.
with read_files as (
    select * from sources
),

final as (
    select * from read_files
    order by path
)

select * from final
