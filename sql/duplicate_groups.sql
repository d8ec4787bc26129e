-- duplicate_groups: Groups of papers that are near-duplicates of one another (connected pairs).
-- grain: one row per paper in a group of two or more.
-- key: paper_id
-- reads: pair_groups, papers
-- references: group_id -> papers, paper_id -> papers
-- columns:
--   group_id: the group: its smallest paper_id
--   paper_id: a paper in the group
--   group_size: papers in the group (2 or more)
--   title: the paper's title
--   source_path: file of the paper
--   line: line of the paper
-- pair_groups: connected components of the near-duplicate pairs, each paper keeping its
-- closest pairs.
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
