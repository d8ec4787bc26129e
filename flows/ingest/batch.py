"""Small files parsed together: each one's raw records read (and its bytes hashed) on its
own, then all of them cleaned, checked and counted as one frame, and handed back file by
file with their own sources row, records and rejects.

A folder of 20,000 files of one abstract each cost about 18 polars collects a file when
each file was parsed alone; together they cost a few a batch. Every file's row, records
and rejects are those it would have had alone (its flags and file-level checks are
computed per file within the frame).
"""

from __future__ import annotations

import gzip
import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from flows.ingest import read
from flows.ingest.anomalies import CharacterStats
from flows.ingest.clean import normalise_contained
from flows.ingest.detect import sniff_data
from flows.ingest.model import FILE_ERRORS, ParseJob, Progress, SourceFile
from flows.ingest.rawfile import open_regular, shown
from flows.ingest.read import (
    describe,
    failed_row,
    file_warning,
    numbered,
    records_frame,
)
from flows.ingest.readers import reader_for

# Files up to this size are read whole into a batch; larger ones are parsed on their own.
SMALL_FILE_BYTES = 1 << 20


@dataclass
class SmallFile:
    """A small file read for a batch: its job, its sources row (its error, where it could
    not be read) and its raw records."""

    job: ParseJob
    source: SourceFile
    rows: list[dict] = field(default_factory=list)


def read_small(job: ParseJob, progress: Progress | None = None) -> SmallFile | None:
    """A small file's raw records, numbered, with its sources row; None for a format whose
    reader needs the file's path (Parquet), which is parsed on its own, or for a file of
    more records than a batch holds. The file is read once, whole: its row has the sha256
    and size of those bytes."""
    source = SourceFile(path=shown(job.path), sha256=job.sha256, bytes=job.size)
    try:
        with open_regular(job.path) as handle:
            data = handle.read()
        layout = describe(job.path, source, job.override, job.parts, sniff_data(data))
        reader = reader_for(layout.format)
        if reader.needs_path:
            return None
        stream = io.BytesIO(data)
        if layout.gzip:
            stream = gzip.GzipFile(fileobj=stream, mode="rb")
        rows = list(numbered(reader.read(stream, layout, job.override)))
    except FILE_ERRORS as exc:
        return SmallFile(job, failed_row(source, exc))
    if len(rows) > read.BATCH_RECORDS:  # streamed in batches, on its own
        return None
    digest = (hashlib.sha256(data).hexdigest(), len(data))
    if digest != (job.sha256, job.size):
        source.hashed = (job.sha256, job.size)
        source.sha256, source.bytes = digest
    if progress:
        progress(source.path, job.size, job.size)
    return SmallFile(job, source, rows)


@dataclass
class Parsed:
    """A batch parsed: each file's sources row (in order), the accepted records of all of
    them (in file and record order) and how many are each file's, and each file's rejects
    (an empty frame for most)."""

    sources: list[SourceFile]
    records: pl.DataFrame
    accepted: list[int]
    rejects: list[pl.DataFrame]


def parse_small(files: Sequence[SmallFile], min_words: int, max_words: int | None = None) -> Parsed:
    """Clean, check and count the records of small files read by `read_small`, as one frame
    (never split into a frame a file: 20,000 of those held 600 MB)."""
    readable = [f for f in files if f.source.error is None and f.rows]
    rows = [row for f in readable for row in f.rows]
    frame = records_frame(rows, [(f.source, len(f.rows)) for f in readable])
    ok, bad = normalise_contained(frame, min_words, max_words)
    stats = CharacterStats()
    ok = stats.flag(ok)
    counted = _counts(ok, bad)
    # Rejects are few: a frame for each file that has some.
    rejects = (
        {k[0]: v for k, v in bad.partition_by("source_path", as_dict=True).items()}
        if bad.height
        else {}
    )
    for small in files:
        source = small.source
        if source.error is None:
            source.records_seen = len(small.rows)
            for name, value in counted.get(source.path, {}).items():
                setattr(source, name, value)
            source.warning = file_warning(source, stats)
    sources = [small.source for small in files]
    empty = bad.clear()
    return Parsed(
        sources,
        ok,
        [s.accepted if s.error is None else 0 for s in sources],
        [rejects.get(s.path, empty) if s.error is None else empty for s in sources],
    )


def _counts(ok: pl.DataFrame, bad: pl.DataFrame) -> dict[str, dict]:
    """Per file path: the counts of its sources row (accepted, rejected, rules, flags, ...)."""
    counts: dict[str, dict] = {}
    kept = ok.group_by("source_path").agg(
        accepted=pl.len(),
        control_chars_removed=pl.col("control_chars_removed").sum(),
        no_venue=pl.col("venue").null_count(),
        no_year=pl.col("year").null_count(),
    )
    for row in kept.iter_rows(named=True):
        counts[row.pop("source_path")] = row | {"rejected_by_rule": {}, "flag_counts": {}}
    flags = ok.select("source_path", "flags").explode("flags").drop_nulls("flags")
    for path, flag, n in flags.group_by("source_path", "flags").len().sort("flags").iter_rows():
        counts[path]["flag_counts"][flag] = n
    rules = bad.group_by("source_path", "rule").len().sort("rule")
    for path, rule, n in rules.iter_rows():
        entry = counts.setdefault(
            path,
            {"accepted": 0, "control_chars_removed": 0, "no_venue": 0, "no_year": 0}
            | {"rejected_by_rule": {}, "flag_counts": {}},
        )
        entry["rejected_by_rule"][rule] = n
    for entry in counts.values():
        entry["rejected"] = sum(entry["rejected_by_rule"].values())
    return counts
