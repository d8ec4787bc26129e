"""Reading: one raw file into batches of cleaned records, accepted ones spilled to Parquet
parts and rejects kept, with the sources row of the bytes that were read."""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from flows.core import cache as sealed
from flows.ingest.anomalies import CharacterStats
from flows.ingest.cache import PartWriter
from flows.ingest.clean import normalise_contained
from flows.ingest.detect import detect_format, open_binary, sniff
from flows.ingest.metadata import file_metadata
from flows.ingest.model import (
    FILE_ERRORS,
    NO_OVERRIDE,
    RECORD_SCHEMA,
    SNIPPET_CHARS,
    FileOverride,
    Layout,
    Progress,
    SourceFile,
)
from flows.ingest.paths import (
    file_digest,
)
from flows.ingest.rawfile import shown
from flows.ingest.readers import reader_for

BATCH_RECORDS = 50_000
# A batch is also cut at this many characters of raw text, so long records keep it small.
BATCH_CHARS = 32 << 20

RAW_COLUMNS = [c for c in RECORD_SCHEMA if c not in ("source_path", "source_sha256")]
LIST_COLUMNS = [c for c, t in RECORD_SCHEMA.items() if t == pl.List(pl.String)]


def numbered(records: Iterator[dict], before: int = 0) -> Iterator[dict]:
    """A reader's records numbered from `before` + 1. Where the reader fails after some
    records, the rest of the file becomes one `unreadable_rest` reject and the records
    before it are kept; a reader that fails at once fails the file."""
    record_no = before
    last: dict = {}
    while True:
        try:
            record = next(records)
        except StopIteration:
            return
        except Exception as exc:  # noqa: BLE001 - any reader failure ends the file, not the run
            if record_no == before:
                raise
            line = (last.get("line") or 0) + 1
            record = {
                "line": line,
                "byte_offset": last.get("byte_offset") or 0,
                "read_rule": "unreadable_rest",
                "read_reason": f"the file could not be read after line {line - 1}: "
                f"{type(exc).__name__}: {exc}",
            }
            records = iter(())
        record_no += 1
        record["record_no"] = record_no
        last = record
        yield record


def record_batches(
    records: Iterator[dict], source: SourceFile, before: int = 0, sizes: list[int] | None = None
) -> Iterator[pl.DataFrame]:
    """Raw records in batches of RECORD_SCHEMA, numbered (see `numbered`), with the file's
    venue and year: the record's own, else the file's (see `file_metadata`).

    Args:
        sizes: where each record's characters of text, which cut the batches, are added.
    """
    rows: list[dict] = []
    chars = 0
    for record in numbered(records, before):
        rows.append(record)
        size = len(record.get("abstract_raw") or "") + len(record.get("title_raw") or "")
        chars += size
        if sizes is not None:
            sizes.append(size)
        if len(rows) >= BATCH_RECORDS or chars >= BATCH_CHARS:
            yield records_frame(rows, [(source, len(rows))])
            rows, chars = [], 0
    if rows:
        yield records_frame(rows, [(source, len(rows))])


def records_frame(rows: list[dict], files: Sequence[tuple[SourceFile, int]]) -> pl.DataFrame:
    """Raw records as a frame of RECORD_SCHEMA: the rows of each of `files` in turn (a file
    and how many rows are its), each given its file's path, hash, venue and year. A record
    whose values do not fit the schema becomes a `bad_value` reject, not the frame's
    failure."""
    try:
        frame = _frame(rows)
    except Exception:  # noqa: BLE001 - find the records at fault one by one
        frame = pl.concat([_frame([row], isolate=True) for row in rows], how="vertical_relaxed")

    def each(value, dtype) -> pl.Series:
        return pl.Series([value(source) for source, n in files for _ in range(n)], dtype=dtype)

    if len(files) == 1:  # one file: its values as literals
        ((source, _),) = files
        path, sha = pl.lit(source.path), pl.lit(source.sha256)
        venue = pl.lit(source.venue, dtype=pl.String)
        year = pl.lit(source.year, dtype=pl.Int32)
    else:
        path = each(lambda f: f.path, pl.String)
        sha = each(lambda f: f.sha256, pl.String)
        venue, year = each(lambda f: f.venue, pl.String), each(lambda f: f.year, pl.Int32)
    return frame.with_columns(
        source_path=path,
        source_sha256=sha,
        venue=pl.coalesce(pl.col("venue"), venue),
        year=pl.coalesce(pl.col("year"), year),
    ).select(list(RECORD_SCHEMA))


def _frame(rows: list[dict], isolate: bool = False) -> pl.DataFrame:
    columns = {c: [r.get(c) for r in rows] for c in RAW_COLUMNS}
    for c in LIST_COLUMNS:
        columns[c] = [v or [] for v in columns[c]]
    schema = {c: RECORD_SCHEMA[c] for c in RAW_COLUMNS}
    try:
        try:
            return pl.DataFrame(columns, schema=schema)
        except UnicodeEncodeError:
            # Lone surrogates from JSON escapes such as "\ud800" are not text: show U+FFFD.
            columns = {c: [_valid_value(v) for v in values] for c, values in columns.items()}
            return pl.DataFrame(columns, schema=schema)
    except Exception as exc:  # noqa: BLE001 - one record's values, reported on that record
        if not isolate:
            raise
        row = rows[0]
        bad = {
            "record_no": row.get("record_no"),
            "line": row.get("line"),
            "byte_offset": row.get("byte_offset"),
            "read_rule": "bad_value",
            "read_reason": f"a value does not fit its column: {type(exc).__name__}: {exc}",
            "raw_snippet": _snippet_of(row),
        }
        return pl.DataFrame({c: [bad.get(c)] for c in RAW_COLUMNS}, schema=schema)


def _snippet_of(row: Mapping[str, Any]) -> str | None:
    text = row.get("raw_snippet") or row.get("abstract_raw")
    return _valid_value(str(text))[:SNIPPET_CHARS] if text is not None else None


def _valid_value(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_valid_value(v) for v in value]
    return value


@dataclass
class OpenedFile:
    """A raw file opened for its reader: its records, how far reading got (bytes), and the
    sha256 and size of the bytes read once reading is done. `exact`: those are exactly the
    bytes the records came from; else (a reader that reads a path at random, Parquet) they
    are the file's bytes after reading."""

    records: Iterator[dict]
    position: Callable[[], int]
    digest: Callable[[], tuple[str, int]]
    exact: bool = True


def file_records(
    path: Path, layout: Layout, override: FileOverride, stack: ExitStack
) -> OpenedFile:
    """The raw records of a file in its layout, its progress and the digest of what was read."""
    reader = reader_for(layout.format)
    if not reader.needs_path:
        stream, position, digest = open_binary(path, layout.gzip, stack)
        return OpenedFile(reader.read(stream, layout, override), position, digest)
    if not layout.gzip:
        return OpenedFile(
            reader.read(path, layout, override), lambda: 0, partial(file_digest, path), False
        )
    # Random access (Parquet) needs a decompressed temporary copy.
    stream, _, digest = open_binary(path, True, stack)
    target = Path(stack.enter_context(tempfile.TemporaryDirectory())) / path.name.removesuffix(
        ".gz"
    )
    with target.open("wb") as copy:
        shutil.copyfileobj(stream, copy, 1 << 20)
    return OpenedFile(reader.read(target, layout, override), lambda: 0, digest)


def ingest_file(
    path: Path,
    min_words: int,
    sha: str,
    size: int,
    writer: PartWriter,
    override: FileOverride = NO_OVERRIDE,
    max_words: int | None = None,
    progress: Progress | None = None,
    parts: Sequence[str] = (),
) -> tuple[SourceFile, list[pl.DataFrame]]:
    """Parse one raw file: accepted records go to `writer`, rejects come back.

    Only a file that cannot be opened or decoded at all comes back with its error set, no
    records and nothing left in `writer`; a bad record costs that record alone. The sources
    row describes the bytes whose records were read: a file that changed since `sha` and
    `size` were taken gets those of what was read, and a warning.

    Args:
        parts: the path components that may name the file's venue and year.
    """
    hashed = (sha, size)
    for _ in range(2):
        source, rejected, read, exact = _parse_file(
            path, min_words, sha, size, writer, override, max_words, progress, parts
        )
        if source.error is None and read != (sha, size) and exact:
            rejected = _restamp(writer, rejected, read[0])
            source.sha256, source.bytes = read
        if source.error is not None or exact or read == (sha, size):
            if (source.sha256, source.bytes) != hashed and source.error is None:
                source.hashed = hashed
            return source, rejected
        writer.discard()  # some version of it was read at random: read the one now there
        sha, size = read
    failed = SourceFile(path=shown(path), sha256=sha, bytes=size, format=source.format)
    failed.error = (
        f"{shown(path)}: changed while it was read, twice; not read (run again once it is settled)"
    )
    return failed, []


def _parse_file(
    path: Path,
    min_words: int,
    sha: str,
    size: int,
    writer: PartWriter,
    override: FileOverride,
    max_words: int | None,
    progress: Progress | None,
    parts: Sequence[str],
) -> tuple[SourceFile, list[pl.DataFrame], tuple[str, int] | None, bool]:
    """`ingest_file` once: its sources row and rejects, the digest of what was read and
    whether those are exactly the bytes read (see OpenedFile)."""
    source = SourceFile(path=shown(path), sha256=sha, bytes=size)
    counts, stats = Counts(source), CharacterStats()
    try:
        layout = describe(path, source, override, parts)
        with ExitStack() as stack:
            opened = file_records(path, layout, override, stack)

            def advance(ok: pl.DataFrame, bad: pl.DataFrame) -> None:
                if progress:
                    progress(source.path, opened.position(), size)

            batches = record_batches(opened.records, source)
            rejected = parse_batches(batches, min_words, max_words, writer, stats, counts, advance)
            read = opened.digest()
    except FILE_ERRORS as exc:
        writer.discard()
        return failed_row(source, exc), [], None, True
    counts.close()
    source.warning = file_warning(source, stats)
    if progress:
        progress(source.path, size, size)
    return source, rejected, read, opened.exact


class Counts:
    """What the batches of a file (or of a chunk of one) add up to on its sources row."""

    def __init__(self, source: SourceFile):
        self.source = source
        self.flags: Counter[str] = Counter()
        self.rules: Counter[str] = Counter()

    def add(self, batch: pl.DataFrame, ok: pl.DataFrame, bad: pl.DataFrame) -> None:
        """Count one batch: its records, and those accepted (`ok`) and rejected (`bad`)."""
        source = self.source
        source.records_seen += batch.height
        source.accepted += ok.height
        source.rejected += bad.height
        source.control_chars_removed += int(ok["control_chars_removed"].sum())
        source.no_venue += ok["venue"].null_count()
        source.no_year += ok["year"].null_count()
        self.flags.update(ok["flags"].explode().drop_nulls().to_list())
        self.rules.update(bad["rule"].to_list())

    def close(self) -> None:
        """The rules and flags counted, set on the sources row."""
        self.source.rejected_by_rule = dict(sorted(self.rules.items()))
        self.source.flag_counts = dict(sorted(self.flags.items()))


def parse_batches(
    batches: Iterator[pl.DataFrame],
    min_words: int,
    max_words: int | None,
    writer: PartWriter,
    stats: CharacterStats,
    counts: Counts,
    after: Callable[[pl.DataFrame, pl.DataFrame], None],
) -> list[pl.DataFrame]:
    """Clean, flag and count batches of raw records: the accepted ones written, the
    rejects returned; `after` is called with each batch's accepted and rejected."""
    rejected = []
    for batch in batches:
        ok, bad = normalise_contained(batch, min_words, max_words)
        ok = stats.flag(ok)
        writer.write(ok)
        rejected.append(bad)
        counts.add(batch, ok, bad)
        after(ok, bad)
    return rejected


def describe(
    path: Path,
    source: SourceFile,
    override: FileOverride,
    parts: Sequence[str],
    sniffed: tuple[bool, bytes] | None = None,
) -> Layout:
    """A file's layout from its first bytes (`sniffed`: read already, whether gzip and
    the first bytes); its format, venue and year set on `source`."""
    gz, head = sniffed or sniff(path)
    fmt, delimiter = detect_format(head, path.name, override)
    reader = reader_for(fmt)
    header = reader.file_header(head) if reader.file_header else None
    layout = Layout(fmt, gz, delimiter or ",", header=header is not None)
    source.format = layout.label
    source.venue, source.year, source.metadata_from = file_metadata(
        header, override, parts or [path.name], fmt
    )
    return layout


def failed_row(source: SourceFile, exc: BaseException) -> SourceFile:
    """The sources row of a file that could not be read at all: no counts, its error."""
    failed = SourceFile(path=source.path, sha256=source.sha256, bytes=source.bytes)
    failed.format = source.format
    failed.error = f"{source.path}: {shown(exc)}"
    return failed


def file_warning(source: SourceFile, stats: CharacterStats) -> str | None:
    """What a file's parse says of it: its character statistics, and a reading that
    stopped early."""
    stopped = "unreadable_rest" in source.rejected_by_rule
    notes = (
        stats.warning(source.path, source.flag_counts),
        "reading stopped early; see rejects (unreadable_rest)" if stopped else None,
    )
    return "; ".join(filter(None, notes)) or None


def _restamp(writer: PartWriter, rejected: list[pl.DataFrame], sha: str) -> list[pl.DataFrame]:
    """Records and rejects given the sha256 of the bytes they were read from, where the
    file changed after it was hashed (rare: parts are written again)."""
    for name in writer.names:
        part = writer.folder / name
        frame = pl.read_parquet(part).with_columns(source_sha256=pl.lit(sha))
        sealed.write_parquet(part, frame, whole=False)
    return [frame.with_columns(source_sha256=pl.lit(sha)) for frame in rejected]


def changed_note(source: SourceFile) -> str | None:
    """What a run says of a file that changed between its hashing and its reading."""
    if source.hashed is None:
        return None
    return (
        f"the file changed while this run read it ({source.hashed[1]:,} bytes when hashed, "
        f"{source.bytes:,} read): its sha256 and bytes are those of the bytes read"
    )
