-- row_changes: the rows that turn a lake table into its staged version, found by comparing
-- a 64-bit hash of each row (of every column: {row_hash}) between rows of equal key.
-- grain: one row per lake row gone or changed (its key; staged_row null) and per staged
-- row new or changed (its key and rowid in the staged table).
-- upstream: {lake} (the published table) and {staged} (the run's table), keyed by {keys}.
-- Rows equal in key and hash are numbered, so that repeated rows count as EXCEPT ALL counts
-- them: n copies staged against m published leave n - m to add or m - n to remove.
with lake_rows as materialized (
    select {keys}, {row_hash} as row_hash,
        row_number() over (partition by {keys}, row_hash) as copy
    from {lake}
),

staged_rows as materialized (
    select rowid as staged_row, {keys}, {row_hash} as row_hash,
        row_number() over (partition by {keys}, row_hash) as copy
    from {staged}
),

gone as (
    select {keys}, null::bigint as staged_row
    from lake_rows as l
    anti join staged_rows as s
        on {same_key} and l.row_hash = s.row_hash and l.copy = s.copy
),

new as (
    select {keys}, staged_row
    from staged_rows as s
    anti join lake_rows as l
        on {same_key} and l.row_hash = s.row_hash and l.copy = s.copy
),

final as (
    select * from gone
    union all
    select * from new
)

select * from final
