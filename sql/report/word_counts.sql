-- word_counts: the abstract length of every paper, for the length histogram.
-- grain: one row per paper.
-- upstream: papers.
with lengths as (
    select paper_id, word_count from papers
),

final as (
    select word_count from lengths
    where word_count is not null
    order by word_count
)

select * from final
