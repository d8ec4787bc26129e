-- table_checksum: an order-independent content checksum of one table at one version.
-- grain: one row for the table named {table}.
-- upstream: {table} at version getvariable('version').
-- Each row hashes to 64 bits (md5 of its JSON form); the checksum is the count and the
-- sum of those hashes, so it ignores row order and sees duplicates.
with rows as (
    select * from {table} at (version => getvariable('version'))
),

hashed as (
    select ('0x' || left(md5(to_json(rows)), 16))::ubigint::hugeint as row_hash
    from rows
),

final as (
    select count(*) as row_count, coalesce(sum(row_hash), 0)::varchar as hash_sum
    from hashed
)

select * from final
