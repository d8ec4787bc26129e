-- vectors: the embeddings a dense search compares a query with, for flows/read/search.py to
-- hold as one matrix.
-- grain: one row per paper_id of $ids (NULL: every embedded paper).
-- upstream: embeddings.
-- parameters: $ids (VARCHAR[] of paper ids, or NULL for all; a search's hits: see
-- cards.sql for list_contains).
with final as (
    select paper_id, embedding
    from embeddings
    where embedding is not null
      and ($ids is null or list_contains($ids::VARCHAR[], paper_id))
)

select * from final
