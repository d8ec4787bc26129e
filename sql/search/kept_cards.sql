-- kept cards: the cards (cards.sql) of some papers, read from the version's keyword index
-- file, where a long-lived search (the explorer) keeps every paper's card on disk.
-- grain: one row per paper_id of $ids that the version holds.
-- upstream: cards, in the version's search index file.
-- parameters: $ids (VARCHAR[] of paper ids: a search's hits).
with final as (
    select *
    from cards
    where paper_id in (select unnest($ids::VARCHAR[]))
)

select * from final
