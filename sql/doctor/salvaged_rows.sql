-- salvaged_rows: the rows of one table that its readable data files still hold, less the
-- rows their delete files delete (paperlake doctor --repair).
-- grain: one row per row of the table that survives.
-- upstream: the table's data files {files} and delete files {deletes}, read directly.
with data as (
    select *, parse_filename(filename) as data_file
    from read_parquet({files}, filename = true, file_row_number = true, union_by_name = true)
),

deleted as (
    select parse_filename(file_path) as data_file, pos as file_row_number
    from read_parquet({deletes})
),

final as (
    select {columns}
    from data
    anti join deleted using (data_file, file_row_number)
)

select * from final
