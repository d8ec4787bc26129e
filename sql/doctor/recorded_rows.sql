-- recorded_rows: the rows the catalog records of each data file and each delete file.
-- grain: one row per file (its path as the catalog keeps it).
-- upstream: the catalog's metadata tables ducklake_data_file and ducklake_delete_file.
with data_files as (
    select path, record_count as rows from __ducklake_metadata_lake.ducklake_data_file
),

delete_files as (
    select path, delete_count as rows from __ducklake_metadata_lake.ducklake_delete_file
),

final as (
    select * from data_files
    union all
    select * from delete_files
)

select * from final
