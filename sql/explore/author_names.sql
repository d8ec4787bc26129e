-- author_names: how each of a list of authors is named (the spelling most papers use).
-- grain: one row per author_key of $keys found in the version.
-- upstream: authors.
with final as (
    select author_key, name
    from authors
    where list_contains($keys::VARCHAR[], author_key)
)

select * from final
