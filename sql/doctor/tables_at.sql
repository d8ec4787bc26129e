-- tables_at: the tables of the attached catalog that exist at one snapshot ($1 = $2 = it).
-- grain: one row per table.
-- upstream: the catalog's metadata table ducklake_table.
with live as (
    select table_name
    from __ducklake_metadata_lake.ducklake_table
    where begin_snapshot <= $1 and (end_snapshot is null or end_snapshot > $2)
),

final as (
    select distinct table_name from live order by table_name
)

select * from final
