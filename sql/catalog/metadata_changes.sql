-- metadata_changes: what changed in the metadata a paper shows, between two versions.
-- grain: one row per (paper_id, field) whose value differs, for papers in both versions;
-- fields: title, venue, year, authors, external_id, links. Each row names its paper as
-- version b has it (macro paper_title).
-- upstream: papers at versions getvariable('version_a') and ('version_b').
with old_papers as (
    select * from papers at (version => getvariable('version_a'))
),

new_papers as (
    select * from papers at (version => getvariable('version_b'))
),

both_versions as (
    select
        new_papers.paper_id,
        paper_title(new_papers.title, new_papers.abstract) as title,
        [
            {'field': 'title', 'old': old_papers.title, 'new': new_papers.title},
            {'field': 'venue', 'old': old_papers.venue, 'new': new_papers.venue},
            {'field': 'year', 'old': old_papers.year::varchar, 'new': new_papers.year::varchar},
            {
                'field': 'authors',
                'old': array_to_string(old_papers.authors, '; '),
                'new': array_to_string(new_papers.authors, '; ')
            },
            {
                'field': 'external_id',
                'old': old_papers.external_id,
                'new': new_papers.external_id
            },
            {
                'field': 'links',
                'old': array_to_string(list_transform(old_papers.links, l -> l.url), ' '),
                'new': array_to_string(list_transform(new_papers.links, l -> l.url), ' ')
            }
        ] as fields
    from old_papers
    join new_papers using (paper_id)
),

fields as (
    select paper_id, title, unnest(fields, recursive := true)
    from both_versions
),

final as (
    select paper_id, title, field, old, new
    from fields
    where old is distinct from new
)

select * from final
order by paper_id, field
