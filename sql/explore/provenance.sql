-- provenance: the raw records a paper was read from, with each file's format and hash;
-- `first` marks the location papers keeps (the others gave the same paper again).
-- grain: one row per location of $paper_id.
-- upstream: papers, paper_sources, sources.
with paper as (
    select paper_id, source_path, record_no from papers where paper_id = $paper_id
),

final as (
    select
        paper_sources.source_path,
        paper_sources.source_sha256,
        sources.format,
        paper_sources.record_no,
        paper_sources.line,
        paper_sources.byte_offset,
        paper_sources.source_path = paper.source_path
            and paper_sources.record_no = paper.record_no as first
    from paper_sources
    join paper using (paper_id)
    left join sources on sources.path = paper_sources.source_path
    order by first desc, paper_sources.source_path, paper_sources.record_no
)

select * from final
