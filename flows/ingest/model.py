"""What every part of ingest shares: the version of parsing, the tables' schemas and
reject rules, a raw file's settings and layout, and the interface of a format reader.
"""

from __future__ import annotations

import csv
import json
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import polars as pl

from flows.ingest.rawfile import shown

# Bump when parsing or cleaning changes, so that cached parses of unchanged files are redone.
# 4: BibTeX is a format; a file that was read as lines because it holds BibTeX is re-read.
# 6: CSV rows with undoubled inner quotes are read; entities escaped twice are decoded;
# code, dictionaries and tables are rejected (not_prose); withdrawal notices are flagged.
# 7: a record keeps the name of the column or key its id was read from (id_field).
INGEST_VERSION = "7"
SNIPPET_CHARS = 200
SETTINGS_FILE = "paperlake.toml"
# Files a run lists in sources without parsing them for records.
NOT_PARSED = frozenset({"settings", "documentation", "not_regular"})
REJECT_RULES = (
    "empty_abstract",
    "too_short",
    "too_long",
    "not_prose",  # code, a key: value dictionary or a table, not an abstract
    "invalid_utf8",
    "invalid_json",
    "not_a_record",
    "wrong_field_count",
    "unparseable_row",
    "bad_value",  # a field value that could not be mapped or converted
    "cleaning_error",  # cleaning the record's text failed
    "unreadable_rest",  # the file could not be read past this point (e.g. truncated gzip)
)

RECORD_SCHEMA = {
    "source_path": pl.String,
    "source_sha256": pl.String,
    "record_no": pl.Int64,
    "line": pl.Int64,
    "byte_offset": pl.Int64,
    "venue": pl.String,
    "year": pl.Int32,
    "external_id": pl.String,
    "id_field": pl.String,  # the column or key external_id was read from (pmid, PID, id)
    "title_raw": pl.String,
    "authors": pl.List(pl.String),
    "keywords": pl.List(pl.String),
    "categories": pl.List(pl.String),
    "decision": pl.String,
    "abstract_raw": pl.String,
    "decode_error": pl.String,
    # Set by readers: a structural problem (rule and reason), the raw record's first
    # characters, and flags such as a repaired row.
    "read_rule": pl.String,
    "read_reason": pl.String,
    "raw_snippet": pl.String,
    "read_flags": pl.List(pl.String),
}
REJECT_SCHEMA = {
    "source_path": pl.String,
    "source_sha256": pl.String,
    "record_no": pl.Int64,
    "line": pl.Int64,
    "byte_offset": pl.Int64,
    "rule": pl.String,
    "reason": pl.String,
    "raw_snippet": pl.String,
}
SOURCE_SCHEMA = {
    "path": pl.String,
    "sha256": pl.String,
    "bytes": pl.Int64,
    "format": pl.String,
    "venue": pl.String,
    "year": pl.Int32,
    "records_seen": pl.Int64,
    "accepted": pl.Int64,
    "rejected": pl.Int64,
    "error": pl.String,
    "rejected_by_rule": pl.String,  # JSON object: rule -> records
    "flag_counts": pl.String,  # JSON object: flag -> accepted records carrying it
    "control_chars_removed": pl.Int64,
    "metadata_from": pl.String,  # where the file's venue and year came from
    "no_venue": pl.Int64,  # accepted records left without a venue
    "no_year": pl.Int64,
    "warning": pl.String,  # what a user should know about a file that was read
}
# Where reading a file can fail; any of these makes the file an error row, not a crash.
FILE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    ValueError,  # IngestError, JSON and Unicode errors, pyarrow's ArrowInvalid
    RecursionError,  # JSON nested too deep
    zlib.error,
    csv.Error,
    pl.exceptions.PolarsError,
)

Progress = Callable[[str, int, int], None]


class IngestError(ValueError):
    """A raw file that cannot be read at all; it is reported and skipped."""


@dataclass
class SourceFile:
    """One raw file version as seen by a run."""

    path: str
    sha256: str
    bytes: int
    format: str | None = None
    venue: str | None = None
    year: int | None = None
    records_seen: int = 0
    accepted: int = 0
    rejected: int = 0
    error: str | None = None
    cached: bool = False  # read from the parse cache, not parsed again
    rejected_by_rule: dict[str, int] = field(default_factory=dict)
    flag_counts: dict[str, int] = field(default_factory=dict)
    control_chars_removed: int = 0
    metadata_from: str | None = None
    no_venue: int = 0
    no_year: int = 0
    warning: str | None = None
    # The sha256 and size the file had when hashed, where it changed before it was read
    # (the row holds those of the bytes read); said in this run's warning, never cached.
    hashed: tuple[str, int] | None = None

    @property
    def parsed(self) -> bool:
        """Whether this run parsed the file for records: not read from the parse cache, and
        neither a settings or documentation file nor one that could not be read."""
        return not self.cached and self.error is None and self.format not in NOT_PARSED

    def row(self) -> dict:
        """The file's row of the sources table."""
        out = {
            k: shown(v) if isinstance(v, str) else v
            for k, v in vars(self).items()
            if k not in ("cached", "hashed")
        }
        out["rejected_by_rule"] = json.dumps(self.rejected_by_rule, sort_keys=True)
        out["flag_counts"] = json.dumps(self.flag_counts, sort_keys=True)
        return out


@dataclass(frozen=True)
class FileOverride:
    """What a settings file says about the files matching one of its globs."""

    format: str | None = None
    venue: str | None = None
    year: int | None = None
    columns: tuple[tuple[str, str], ...] = ()  # (record field, column name in the file)
    origin: str = ""  # settings file and glob, for messages and the parse cache key

    @property
    def column_map(self) -> dict[str, str]:
        return dict(self.columns)


NO_OVERRIDE = FileOverride()


@dataclass(frozen=True)
class Chunking:
    """When a file is read as byte-range chunks, one parse each, and how large they are:
    plain (not gzip) JSON Lines and CSV/TSV files of `file_bytes` or more."""

    file_bytes: int = 256 << 20
    chunk_bytes: int = 64 << 20


CHUNKING = Chunking()


@dataclass(frozen=True)
class Span:
    """Where a reader reads in a file: from byte `start` (a record's start, after `line`
    lines) up to the first record that starts at or after `stop` (None: the end)."""

    start: int = 0
    stop: int | None = None
    line: int = 0


WHOLE = Span()


@dataclass(frozen=True)
class Chunk:
    """One byte range of a file read in chunks: its place among them, its span, the number
    of records before it and the sha256 of its bytes (start to stop)."""

    index: int
    count: int
    span: Span
    records: int
    sha256: str


@dataclass(frozen=True)
class ParseJob:
    """One raw file version whose parse is not cached yet: a piece a worker can parse, the
    whole file or one chunk of it."""

    path: Path
    sha256: str
    size: int
    override: FileOverride
    parts: tuple[str, ...]  # the path components that may name its venue and year
    chunk: Chunk | None = None


@dataclass(frozen=True)
class Layout:
    """How a file is laid out: format, gzip or not, the delimiter of CSV/TSV, and whether
    its first line is a header naming venue and year (the sample format)."""

    format: str
    gzip: bool = False
    delimiter: str = ","
    header: bool = False

    @property
    def label(self) -> str:
        return f"{self.format}.gz" if self.gzip else self.format


# What a sniff finds: a format (one of FORMATS) and, for csv/tsv, the delimiter.
Found = tuple[str, str]


@dataclass(frozen=True)
class Reader:
    """One family of formats: the names it reads, how it is told from a file's first bytes,
    and how it reads a file into raw records (dicts of RECORD_SCHEMA columns, each with its
    1-based line and byte offset).

    `read(source, layout, override)` gets the file's binary stream (decompressed for gzip)
    or, where `needs_path` is set, the path of a plain copy (Parquet reads at random).
    """

    family: str  # what a file extension promises; the content picks the format within it
    formats: tuple[str, ...]
    read: Callable[[Any, Layout, FileOverride], Iterator[dict]]
    extensions: tuple[str, ...] = ()
    # Tried on the raw head before it is taken as text: a binary format's magic bytes.
    sniff_bytes: Callable[[bytes], Found | None] | None = None
    # Tried on the head as text, lowest `sniff_order` first; the first format found wins.
    sniff: Callable[[str, Mapping[str, str]], Found | None] | None = None
    sniff_order: int = 50
    # Tried when the file's name promises this family but the sniffs found another.
    sniff_named: Callable[[str, Mapping[str, str]], Found | None] | None = None
    # A settings file may claim these formats for any text, whatever the sniffs say.
    claims_any_text: bool = False
    # Venue and year named by the file's first bytes (the sample format's header line).
    file_header: Callable[[bytes], tuple[str, int] | None] | None = None
    needs_path: bool = False
    # The formats whose files can be read in chunks: `read_span(stream, layout, override,
    # span)` reads the records of one span of a seekable stream (at 0), with their lines
    # and offsets in the file; `record_starts(stream, layout, override)` yields the byte
    # offset and line of each record, where a span may start.
    splits: tuple[str, ...] = ()
    read_span: Callable[[IO[bytes], Layout, FileOverride, Span], Iterator[dict]] | None = None
    record_starts: Callable[[IO[bytes], Layout, FileOverride], Iterator[tuple[int, int]]] | None = (
        None
    )
