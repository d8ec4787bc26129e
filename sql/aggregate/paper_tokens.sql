-- paper_tokens: the words of each abstract that topic terms are made of (not published).
-- grain: one row per (paper_id, position) of a kept word.
-- upstream: papers, stopwords.
-- Each paper's rows depend on its own abstract alone, so a run keeps them per paper in its
-- cache and tokenises only papers it has not seen (flows/derive/paper_rows.py, PaperRows).
with words as (
    select
        paper_id,
        regexp_extract_all(lower(abstract), '[a-z][a-z0-9]*(?:-[a-z0-9]+)*') as words
    from papers
),

tokens as (
    select
        paper_id,
        unnest(words) as word,
        unnest(range(1, len(words) + 1)) as position
    from words
),

final as (
    select *
    from tokens
    where length(word) >= 3
      and word not in (select word from stopwords)
)

select * from final
