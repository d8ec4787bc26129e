-- names: how the explorer names each paper to a person: its title, or for an untitled
-- paper its abstract's first words (macro paper_title), and which of the two it is; and
-- the key of each of its authors in the authors table (as sql/authors.sql makes it: the
-- name trimmed, spaces single, lower case, accents stripped), for a link to their page.
-- grain: one row per id in $ids found in the version (every paper when $ids is NULL).
-- upstream: papers; macros paper_title, paper_untitled.
with final as (
    select
        paper_id,
        paper_title(title, abstract) as title,
        paper_untitled(title) as untitled,
        list_transform(
            authors, name -> lower(strip_accents(trim(regexp_replace(name, '\s+', ' ', 'g'))))
        ) as author_keys
    from papers
    where $ids is null or paper_id in (select unnest($ids::VARCHAR[]))
)

select * from final
