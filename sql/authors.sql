-- authors: One row per author, as names are written across papers, with their papers.
-- grain: one row per author name normalised for case, accents and spacing.
-- key: author_key
-- reads: papers
-- columns:
--   author_key: the name in lower case, accents stripped, spaces single
--   name: the name as most papers write it (ties: the first in sort order)
--   spellings: every way the papers write it
--   papers: papers that list it
--   venues: venues of those papers
--   years: years of those papers
--   paper_ids: those papers
-- "José García" and "Jose  GARCIA" are one author; "J. García" is another (initials are
-- not expanded).
with written as (
    select
        paper_id,
        venue,
        year,
        trim(regexp_replace(unnest(authors), '\s+', ' ', 'g')) as name
    from papers
),

named as (
    select
        *,
        lower(strip_accents(name)) as author_key
    from written
    where name <> ''
),

spellings as (
    select
        author_key,
        name,
        count(distinct paper_id) as uses
    from named
    group by author_key, name
),

final as (
    select
        named.author_key,
        first(spellings.name order by spellings.uses desc, spellings.name) as name,
        list_sort(list(distinct named.name)) as spellings,
        count(distinct named.paper_id) as papers,
        coalesce(
            list_sort(list(distinct named.venue) filter (where named.venue is not null)), []
        ) as venues,
        coalesce(
            list_sort(list(distinct named.year) filter (where named.year is not null)), []
        ) as years,
        list_sort(list(distinct named.paper_id)) as paper_ids
    from named
    join spellings using (author_key)
    group by named.author_key
    order by named.author_key
)

select * from final
