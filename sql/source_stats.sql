-- source_stats: Per raw file: records, papers and duplicates.
-- grain: one row per source file.
-- key: source_path
-- reads: sources, paper_sources, papers
-- references: source_path -> sources
-- columns:
--   source_path: the raw file
--   format: format read
--   venue: its venue
--   year: its year
--   records_seen: records read
--   accepted: accepted
--   rejected: rejected
--   papers: distinct papers first seen in it
--   duplicate_records: records whose paper came first elsewhere
--   error: why it could not be read, if so
with located as (
    select
        paper_sources.source_path,
        paper_sources.paper_id,
        papers.source_path = paper_sources.source_path
            and papers.record_no = paper_sources.record_no as is_first_location
    from paper_sources
    join papers using (paper_id)
),

per_source as (
    select
        source_path,
        count(*) as records_accepted,
        count(distinct paper_id) as papers,
        count(*) filter (where not is_first_location) as duplicate_records
    from located
    group by all
),

final as (
    select
        sources.path as source_path,
        sources.format,
        sources.venue,
        sources.year,
        sources.records_seen,
        sources.accepted,
        sources.rejected,
        coalesce(per_source.papers, 0) as papers,
        coalesce(per_source.duplicate_records, 0) as duplicate_records,
        sources.error
    from sources
    left join per_source on per_source.source_path = sources.path
    order by sources.path
)

select * from final
