-- salvaged_rows_no_deletes: the rows of one table that its readable data files still hold,
-- where none of them has a delete file (paperlake doctor --repair).
-- grain: one row per row of the table that survives.
-- upstream: the table's data files {files}, read directly.
with final as (
    select {columns}
    from read_parquet({files}, union_by_name = true)
)

select * from final
