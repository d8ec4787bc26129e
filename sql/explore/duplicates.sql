-- duplicates: the near-duplicates of a paper: its pairs above the threshold, and the
-- other papers of its near-duplicate group (pairs of large groups are not listed, their
-- members are), closest first.
-- grain: one row per other paper of the pairs or group of $paper_id.
-- upstream: duplicates, duplicate_groups.
with pairs as (
    select
        if(paper_a = $paper_id, paper_b, paper_a) as paper_id,
        score,
        kind
    from duplicates
    where $paper_id in (paper_a, paper_b)
),

own_group as (
    select group_id, group_size from duplicate_groups where paper_id = $paper_id
),

group_mates as (
    select duplicate_groups.paper_id, own_group.group_id, own_group.group_size
    from duplicate_groups
    join own_group using (group_id)
    where duplicate_groups.paper_id <> $paper_id
),

final as (
    select
        paper_id,
        round(pairs.score, 4) as score,
        pairs.kind,
        group_mates.group_id,
        group_mates.group_size
    from pairs
    full join group_mates using (paper_id)
    order by pairs.score desc nulls last, paper_id
)

select * from final
