-- duplicate_groups: papers that are near-duplicates of one another, as connected groups.
-- grain: one row per paper in a group of two or more.
-- upstream: pair_groups (connected components of the near-duplicate pairs, each paper
-- keeping its closest pairs; see flows/derive/duplicates.py group_pairs), papers.
with members as (
    select paper_id, group_id, group_size
    from pair_groups
),

final as (
    select
        members.group_id,
        members.paper_id,
        members.group_size,
        papers.title,
        papers.source_path,
        papers.line
    from members
    join papers using (paper_id)
    order by members.group_size desc, members.group_id, members.paper_id
)

select * from final
