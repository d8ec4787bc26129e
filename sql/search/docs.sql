-- docs: the text the keyword index covers, one row per paper (title and abstract).
-- grain: one row per paper_id.
-- upstream: papers.
with final as (
    select
        paper_id,
        concat_ws(' ', title, abstract) as text
    from papers
)

select * from final
