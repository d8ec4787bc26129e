"""Files read in chunks (planned by flows/ingest/chunks.py): each chunk parsed into the
parse cache on its own, on a worker or in turn, and a file's chunks put together into
the parse a whole read gives.

A chunk's records, rejects and counts are those its records have in a whole read. What a
whole read decides over a batch of records is decided once every chunk is read, over the
batches the whole read makes: each chunk keeps each record's characters of text (which
cut batches) and its fate, its outline. So a file's lost letters, told from the first
records of each batch, are flagged as the whole read flags them. Where a batch is mostly
code (the whole read then rejects its other records as not_prose too), a chunk could not
be read, or the file changed, the file is read whole instead.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

from flows.core import cache as sealed
from flows.ingest import anomalies, read
from flows.ingest.anomalies import (
    CharacterStats,
    FileCounts,
    letter_counts,
    missing_letter_flags,
    with_letters,
)
from flows.ingest.cache import ParseCache, StoredChunk
from flows.ingest.chunks import RangeReader, plan_chunks, splits
from flows.ingest.clean import concat_frames
from flows.ingest.model import (
    FILE_ERRORS,
    REJECT_SCHEMA,
    Chunk,
    Chunking,
    ParseJob,
    Progress,
    SourceFile,
)
from flows.ingest.prose import CODE_FILE_RECORDS, CODE_FILE_SHARE
from flows.ingest.rawfile import shown
from flows.ingest.read import Counts, describe, file_warning, parse_batches, record_batches
from flows.ingest.readers import reader_for

# What became of a record, in a chunk's outline.
ACCEPTED, NOT_PROSE, REJECTED = 0, 1, 2
OUTLINE_SCHEMA = {"record_no": pl.Int64, "chars": pl.Int64, "fate": pl.Int8}
COUNTED = ("records_seen", "accepted", "rejected", "control_chars_removed", "no_venue", "no_year")

Parsed = tuple[SourceFile, list[Path], pl.DataFrame]


def file_chunks(job: ParseJob, cache: ParseCache, chunking: Chunking) -> list[Chunk] | None:
    """The chunks of a file version, planned once and kept in the cache; None where the
    file is read whole (small, of a format that does not split, or changed)."""
    if job.size < chunking.file_bytes:
        return None
    try:
        source = SourceFile(shown(job.path), job.sha256, job.size)
        layout = describe(job.path, source, job.override, job.parts)
        if not splits(layout, job.size, chunking):
            return None
        if (planned := cache.load_plan(job, chunking.chunk_bytes)) is not None:
            return planned
        cache.drop_chunks(job)  # chunks of another plan are no chunks of this one
        digest = (job.sha256, job.size)
        planned = plan_chunks(job.path, layout, job.override, digest, chunking.chunk_bytes)
    except FILE_ERRORS:
        return None  # the whole read says what is wrong with it
    if planned:
        cache.store_plan(job, chunking.chunk_bytes, planned)
    return planned


def parse_in_chunks(
    job: ParseJob,
    cache: ParseCache,
    chunking: Chunking,
    progress: Progress | None = None,
) -> Parsed | None:
    """A file's parse from its chunks (those not in the cache yet parsed now, in turn), put
    together and kept in the cache as the file's entry: its sources row, parts and
    rejects. None where the file is to be read whole (see the module's doc)."""
    chunks = file_chunks(job, cache, chunking)
    if not chunks:
        return None
    stored = []
    for chunk in chunks:
        one = replace(job, chunk=chunk)
        if (got := cache.load_chunk(one)) is None:
            parse_chunk(one, cache, progress)
            got = cache.load_chunk(one)
        stored.append(got)
    together = put_together(job, stored, cache) if all(stored) else None
    if together is None:
        cache.drop_chunks(job)
    return together


def parse_chunk(job: ParseJob, cache: ParseCache, progress: Progress | None = None) -> SourceFile:
    """Parse one chunk of a file (`job.chunk`) into the parse cache; its counts (a sources
    row of its records), or why it cannot stand for its part of a whole read."""
    chunk: Chunk = job.chunk
    source = SourceFile(path=shown(job.path), sha256=job.sha256, bytes=job.size)
    writer = cache.chunk_writer(job)
    counts, stats = Counts(source), CharacterStats(letters=False)
    sizes: list[int] = []
    fates: list[pl.DataFrame] = []
    doubts: list[str] = []
    rejected: list[pl.DataFrame] = []
    try:
        layout = describe(job.path, source, job.override, job.parts)
        with RangeReader(job.path, chunk.span) as stream:

            def after(ok: pl.DataFrame, bad: pl.DataFrame) -> None:
                fates.append(batch_fates(ok, bad, doubts))
                if progress:
                    progress(source.path, min(stream.tell(), job.size), job.size)

            records = reader_for(layout.format).read_span(stream, layout, job.override, chunk.span)
            batches = record_batches(records, source, chunk.records, sizes)
            rejected = parse_batches(
                batches, cache.min_words, cache.max_words, writer, stats, counts, after
            )
            if stream.sha256() != chunk.sha256:
                doubts.append("the file changed since its chunks were planned")
    except FILE_ERRORS as exc:
        writer.discard()
        doubts.append(shown(exc))
    counts.close()
    if "unreadable_rest" in source.rejected_by_rule:
        doubts.append("reading stopped early")
    outline = pl.DataFrame(schema=OUTLINE_SCHEMA)
    if not doubts:
        fated = concat_frames(fates, {"record_no": pl.Int64, "fate": pl.Int8}).sort("record_no")
        outline = fated.with_columns(chars=pl.Series(sizes, dtype=pl.Int64))
        outline = outline.select(list(OUTLINE_SCHEMA))
    found = stats.files.get(source.path, FileCounts())
    spec = {k: v for k, v in vars(source).items() if k not in ("cached", "hashed")}
    spec |= {"flagged": dict(found.flagged), "examples": found.examples}
    spec |= {"doubt": "; ".join(doubts) or None}
    cache.store_chunk(job, spec, writer, concat_frames(rejected, REJECT_SCHEMA), outline)
    return source


def batch_fates(ok: pl.DataFrame, bad: pl.DataFrame, doubts: list[str]) -> pl.DataFrame:
    """What became of each record of a batch (`ok` accepted, `bad` rejected); a batch that
    is mostly code adds a doubt (its other records are rejected as not_prose with it)."""
    code = bad.filter(pl.col("rule") == "not_prose").height
    eligible = ok.height + code
    if eligible >= CODE_FILE_RECORDS and code >= CODE_FILE_SHARE * eligible:
        doubts.append("a batch of records that are mostly code")
    fate = pl.when(pl.col("rule") == "not_prose").then(NOT_PROSE).otherwise(REJECTED)
    return pl.concat(
        [
            ok.select("record_no", fate=pl.lit(ACCEPTED, dtype=pl.Int8)),
            bad.select("record_no", fate=fate.cast(pl.Int8)),
        ]
    )


def batch_starts(chars: np.ndarray) -> np.ndarray:
    """The index of the first record of each batch a whole read cuts (see `record_batches`),
    given each record's characters of text."""
    total = np.cumsum(chars, dtype=np.int64)
    starts, first, n = [], 0, len(chars)
    while first < n:
        starts.append(first)
        before = total[first - 1] if first else 0
        full = int(np.searchsorted(total, before + read.BATCH_CHARS, side="left"))
        first = min(full, first + read.BATCH_RECORDS - 1, n - 1) + 1
    return np.array(starts, dtype=np.int64)


def put_together(job: ParseJob, stored: list[StoredChunk], cache: ParseCache) -> Parsed | None:
    """A file's chunks as the parse of the whole file, kept in the cache; None where they
    cannot stand for a whole read (a doubt of a chunk, or a batch of code)."""
    specs = [one.spec for one in stored]
    if any(spec["doubt"] for spec in specs):
        return None
    outline = pl.concat([one.outline for one in stored])
    if outline.height != sum(spec["records_seen"] for spec in specs):
        return None
    starts = batch_starts(outline["chars"].to_numpy())
    ends = np.append(starts[1:], outline.height)
    outline = outline.with_columns(_batch=np.repeat(np.arange(len(starts)), ends - starts))
    if code_batch(outline):
        return None
    source = added_up(job, specs)
    parts = [part for one in stored for part in one.parts]
    counts, lost = letters_found(parts, outline)
    if any(lost.values()):
        parts, added = flag_lost(parts, outline, lost)
        source.flag_counts = dict(sorted((Counter(source.flag_counts) + added).items()))
    for spec in specs:
        counts.flagged.update(spec["flagged"])
        for name, example in spec["examples"].items():
            counts.examples.setdefault(name, example)
    stats = CharacterStats()
    stats.files[source.path] = counts
    source.warning = file_warning(source, stats)
    rejects = concat_frames([one.rejects for one in stored], REJECT_SCHEMA)
    names = [part.name for part in parts]
    return source, cache.store_chunked(source, job, names, rejects), rejects


def code_batch(outline: pl.DataFrame) -> bool:
    """Whether a batch of the whole read is mostly code (see `reject_not_prose`)."""
    per = outline.group_by("_batch").agg(
        code=(pl.col("fate") == NOT_PROSE).sum(), eligible=(pl.col("fate") <= NOT_PROSE).sum()
    )
    mostly = (pl.col("eligible") >= CODE_FILE_RECORDS) & (
        pl.col("code") >= CODE_FILE_SHARE * pl.col("eligible")
    )
    return per.filter(mostly).height > 0


def added_up(job: ParseJob, specs: list[dict]) -> SourceFile:
    """The sources row of a file from its chunks' counts."""
    first = specs[0]
    source = SourceFile(shown(job.path), job.sha256, job.size, format=first["format"])
    source.venue, source.year = first["venue"], first["year"]
    source.metadata_from = first["metadata_from"]
    rules, flags = Counter(), Counter()
    for spec in specs:
        for name in COUNTED:
            setattr(source, name, getattr(source, name) + spec[name])
        rules.update(spec["rejected_by_rule"])
        flags.update(spec["flag_counts"])
    source.rejected_by_rule = dict(sorted(rules.items()))
    source.flag_counts = dict(sorted(flags.items()))
    return source


def letters_found(parts: list[Path], outline: pl.DataFrame) -> tuple[FileCounts, dict]:
    """The letters a whole read counts (over the first accepted records of each batch),
    and the letters lost once each batch is counted (batch: letters)."""
    counts, lost = FileCounts(), {}
    if not parts:
        return counts, lost
    accepted = outline.filter(pl.col("fate") == ACCEPTED)
    first = pl.int_range(pl.len()).over("_batch") < anomalies.SAMPLE_RECORDS
    sample = (
        accepted.filter(first)
        .group_by("_batch")
        .agg(low=pl.col("record_no").min(), high=pl.col("record_no").max())
    )
    scan = pl.scan_parquet(parts).select("record_no", "abstract")
    # A batch's sample is a run of its accepted records: between its first and last
    # record, the parts hold no other (a batch at a time, from the parts that hold it).
    for batch, low, high in sample.sort("_batch").iter_rows():
        abstracts = scan.filter(pl.col("record_no").is_between(low, high)).collect()
        counts.add(letter_counts(abstracts["abstract"]))
        lost[batch] = counts.lost_letters()
    return counts, lost


def flag_lost(
    parts: list[Path], outline: pl.DataFrame, lost: dict[int, list[str]]
) -> tuple[list[Path], Counter]:
    """Flag the letters lost (by batch: `lost`) on the records of each part, as a whole
    read flags them. A part that changes is written anew beside the chunk's own (which
    stays as its chunk's index names it, should this put-together be cut short).

    Returns:
        the parts, and the flags added.
    """
    batches: dict[str, list[int]] = {}
    for batch, letters in lost.items():
        for c in letters:
            batches.setdefault(c, []).append(batch)
    flags = missing_letter_flags({c: pl.col("_batch").is_in(b) for c, b in batches.items()})
    where = outline.select("record_no", "_batch")
    out, counted = [], Counter()
    for part in parts:
        frame = pl.read_parquet(part)
        added = with_letters(
            frame.join(where, on="record_no", how="left", maintain_order="left")
        ).with_columns(_added=pl.concat_list(flags).list.drop_nulls())
        if added["_added"].list.len().sum() == 0:
            out.append(part)
            continue
        counted.update(added["_added"].explode().drop_nulls().to_list())
        flagged = added.with_columns(flags=pl.col("flags").list.concat("_added"))
        out.append(part.with_name(f"{part.stem}-flagged.parquet"))
        sealed.write_parquet(out[-1], flagged.select(frame.columns), whole=False)
    return out, counted
