"""Ingest: raw files into records, each either accepted (a paper location) or rejected.

A file's format is told by its content; its name is a hint and a check. Readers stream
each file and yield raw records with their 1-based line and byte offset; cleaning runs
as polars expressions over batches of records; accepted records are spilled to Parquet
parts, so memory stays bounded whatever the size of the input.

Formats: the sample format (a header line naming venue and year, then abstracts
separated by blank lines), one abstract per line, JSON Lines (the arXiv OAI snapshot
among them), JSON arrays, CSV and TSV with a header, Parquet, and the gzip of each.
A `paperlake.toml` beside the raw files can set format, venue, year and columns per file.
"""

from __future__ import annotations

import ast
import codecs
import csv
import fnmatch
import gzip
import hashlib
import html
import itertools
import json
import os
import re
import shutil
import tempfile
import tomllib
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse

import polars as pl

from flows.settings import SQL_DIR

# Bump when parsing or cleaning changes, so that cached parses of unchanged files are redone.
INGEST_VERSION = "3"
BATCH_RECORDS = 50_000
# A batch is also cut at this many characters of raw text, so long records keep it small.
BATCH_CHARS = 32 << 20
SNIPPET_CHARS = 200
SNIFF_BYTES = 64 << 10
JSON_CHUNK = 1 << 20
# Lists nested deeper than this in a field value are not read further.
MAX_VALUE_DEPTH = 20
# A JSON value that does not parse within this many characters is taken as broken.
JSON_MAX_RECORD = 64 << 20
CSV_FIELD_LIMIT = 16 << 20
SETTINGS_FILE = "paperlake.toml"
SEEDS_DIR = SQL_DIR / "seeds"
# Files in a raw folder that describe the data rather than hold it.
DOCUMENTATION_RE = re.compile(r"(?i)^(?:readme|license|licence|changelog|notice)(?:\.\w+)?$")
FORMATS = ("blocks", "lines", "jsonl", "arxiv", "json", "csv", "tsv", "parquet")
REJECT_RULES = (
    "empty_abstract",
    "too_short",
    "too_long",
    "invalid_utf8",
    "invalid_json",
    "not_a_record",
    "wrong_field_count",
    "unparseable_row",
    "bad_value",  # a field value that could not be mapped or converted
    "cleaning_error",  # cleaning the record's text failed
    "unreadable_rest",  # the file could not be read past this point (e.g. truncated gzip)
)

HEADER_RE = re.compile(
    r"^\s*(?P<venue>[A-Za-z][\w&.+\- ]*?)\s+(?P<year>(?:19|20)\d{2})"
    r"(?:\s+(?:papers|abstracts|submissions|accepted papers))?\s*:?\s*$",
    re.IGNORECASE,
)
# Venue and year at the start of a file name: ICLR17_submissions.csv, neurips-2024.jsonl.
NAME_RE = re.compile(
    r"^(?P<venue>[A-Za-z][A-Za-z&+]*?)[-_ ]?(?P<year>(?:19|20)\d{2}|\d{2})(?=$|[-_ .])"
)
YEAR_RE = re.compile(r"(?<!\d)(1[89]\d{2}|20\d{2})(?!\d)")
URL_RE = r"https?://[^\s<>\"'{}\\]*"
URL_TRAILING = ".,;:)]}'\""
CODE_HOSTS = {"github.com", "gitlab.com", "bitbucket.org", "huggingface.co", "codeberg.org"}
REVIEW_HOSTS = {"anonymous.4open.science", "openreview.net"}

# Text macros whose argument is the visible text; applied innermost first.
TEXT_MACROS = (
    "textbf|textit|texttt|textsc|textrm|textsf|emph|underline|mathrm|mathbf|mathit|"
    "mathcal|mathbb|mathsf|mathtt|boldsymbol|operatorname|text"
)
MATH_SYMBOLS = {
    "times": "×",
    "cdot": "·",
    "leq": "≤",
    "geq": "≥",
    "neq": "≠",
    "approx": "≈",
    "sim": "~",
    "pm": "±",
    "rightarrow": "→",
    "leftarrow": "←",
    "infty": "∞",
    "sqrt": "√",
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "epsilon": "ε",
    "varepsilon": "ε",
    "theta": "θ",
    "lambda": "λ",
    "mu": "μ",
    "sigma": "σ",
    "tau": "τ",
    "phi": "φ",
    "pi": "π",
    "rho": "ρ",
    "omega": "ω",
    "Omega": "Ω",
    "Delta": "Δ",
    "ell": "ℓ",
    "ldots": "...",
    "dots": "...",
}
# TeX accents (\'a, \"{o}, {\c c}) and the combining marks they stand for.
TEX_ACCENTS = {
    "'": "\u0301",
    "`": "\u0300",
    '"': "\u0308",
    "^": "\u0302",
    "~": "\u0303",
    "=": "\u0304",
    ".": "\u0307",
    "c": "\u0327",
    "v": "\u030c",
    "u": "\u0306",
    "H": "\u030b",
    "r": "\u030a",
}
# Inline tags vanish (R<sup>2</sup> is R2); block tags leave a space between words.
# Attributes must have a value, so that "a<b and c>d" in running text is not a tag.
_TAG_TAIL = r"(?:\s+[\w:-]+\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'>]+))*\s*/?>"
INLINE_TAG_RE = (
    r"(?i)</?(?:b|i|u|s|em|strong|sub|sup|span|a|font|small|big|tt|code|mark|abbr|cite|q|"
    r"strike|del|ins|var|kbd|samp|math|mi|mo|mn|mrow|msup|msub|jats:italic|jats:bold|"
    r"jats:sup|jats:sub|jats:monospace|jats:sc)" + _TAG_TAIL
)
BLOCK_TAG_RE = (
    r"(?i)</?(?:p|br|div|li|ul|ol|h[1-6]|tr|td|th|table|tbody|thead|blockquote|section|"
    r"article|header|footer|hr|dl|dt|dd|jats:[a-z-]+)" + _TAG_TAIL
)
# Removed and counted: control characters other than whitespace, private-use characters,
# and invisible format characters (zero-width space, soft hyphen, byte-order mark).
CONTROL_RE = r"[\p{Cc}\p{Co}\u200b\u00ad\u2060\ufeff&&[^\t\n\r]]"
# Markup in a raw abstract: HTML tags, TeX macros and braces, entities.
MARKUP_RE = r"<[^<>]{0,200}>|\\[A-Za-z]+|[{}$]|&#?\w{1,10};"
COMMON_LETTERS = "etaoins"

# Column or key names that mean a record field, compared case-insensitively.
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "external_id": ("id", "pid", "paper_id", "pmid", "paperid", "arxiv_id", "uid"),
    "title_raw": ("title", "paper_title"),
    "abstract_raw": ("abstract", "summary", "abstract_text", "paper_abstract"),
    "authors": ("authors", "author", "author_names"),
    "keywords": ("keywords", "keyword", "tags"),
    "year": ("year", "pub_year", "publication_year"),
    "venue": ("venue", "journal", "conference", "booktitle"),
    "decision": ("decision", "status"),
    "categories": ("categories", "category"),
}
ALIAS_FIELD = {alias: name for name, aliases in FIELD_ALIASES.items() for alias in aliases}
# The field names a settings file uses in `columns`.
SETTING_FIELDS = {
    "id": "external_id",
    "title": "title_raw",
    "abstract": "abstract_raw",
    "authors": "authors",
    "keywords": "keywords",
    "year": "year",
    "venue": "venue",
    "decision": "decision",
    "categories": "categories",
}
# Columns whose values have a recognisable shape: they anchor a repair of a shifted row.
URL_COLUMNS = {"url", "link", "forum", "forum_url", "pdf", "pdf_url", "paper_url", "openreview"}
ANCHOR_SHAPES = {
    "label": re.compile(r"^[^\n]{0,200}$"),
    "id": re.compile(r"^[\w.:/\-]{1,128}$"),
    "url": re.compile(r"^https?://\S+$"),
    "year": re.compile(r"^\s*(?:19|20)\d{2}\s*$"),
}
# A shifted row is rejoined only when this many surplus fields or fewer split it.
MAX_SURPLUS_FIELDS = 64
THOUSANDS_RE = re.compile(r"\d{3}(?!\d)")
EXTENSION_FORMATS = {
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".csv": "csv",
    ".tsv": "csv",
    ".tab": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
FAMILY = {
    "jsonl": "json",
    "arxiv": "json",
    "json": "json",
    "csv": "csv",
    "tsv": "csv",
    "parquet": "parquet",
}

RECORD_SCHEMA = {
    "source_path": pl.String,
    "source_sha256": pl.String,
    "record_no": pl.Int64,
    "line": pl.Int64,
    "byte_offset": pl.Int64,
    "venue": pl.String,
    "year": pl.Int32,
    "external_id": pl.String,
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
LINK_DTYPE = pl.List(pl.Struct({"url": pl.String, "kind": pl.String}))
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

    def row(self) -> dict:
        """The file's row of the sources table."""
        out = {k: v for k, v in vars(self).items() if k != "cached"}
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
class Layout:
    """How a file is laid out: format, gzip or not, and the delimiter of CSV/TSV."""

    format: str
    gzip: bool = False
    delimiter: str = ","

    @property
    def label(self) -> str:
        return f"{self.format}.gz" if self.gzip else self.format


@dataclass
class IngestResult:
    """What ingest hands on: the files seen, accepted records and rejects.

    Accepted records live in Parquet parts (the parse cache or a temporary folder) and
    are read when `records` is first used; `scan_records()` reads them lazily.
    """

    sources: pl.DataFrame
    rejects: pl.DataFrame
    files: list[SourceFile] = field(default_factory=list)
    parts: list[tuple[Path, str]] = field(default_factory=list)  # (Parquet part, source path)
    schema: dict = field(default_factory=dict)
    workdir: tempfile.TemporaryDirectory | None = None  # holds the parts when not cached

    def scan_records(self) -> pl.LazyFrame:
        """Accepted records of every file, in file and record order, read lazily."""
        if not self.parts:
            return pl.LazyFrame(schema=self.schema)
        frames = [
            pl.scan_parquet(part).with_columns(source_path=pl.lit(path))
            for part, path in self.parts
        ]
        return pl.concat(frames, how="vertical_relaxed")

    @cached_property
    def records(self) -> pl.DataFrame:
        return self.scan_records().collect()


# ---------------------------------------------------------------------------------------
# Files, names and settings


def discover(paths: Iterable[Path]) -> list[Path]:
    """Raw files under `paths`: files as given, folders read recursively, hidden names skipped."""
    found: list[Path] = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            found.extend(
                p
                for p in sorted(path.rglob("*"))
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"raw input {path} does not exist")
    # The same file named twice (a folder and a file inside it) is read once.
    unique: dict[Path, Path] = {}
    for p in found:
        unique.setdefault(p.resolve(), p)
    return list(unique.values())


def file_digest(path: Path) -> tuple[str, int]:
    """sha256 and size of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def parse_header(line: str) -> tuple[str, int] | None:
    """Venue and year from a header line such as "ICLR 2026 Papers"; None if it is not one."""
    if len(line) > 120:  # checked first: the pattern is slow on long lines
        return None
    match = HEADER_RE.match(line)
    if not match:
        return None
    return match.group("venue").strip(), int(match.group("year"))


@lru_cache(maxsize=1)
def known_venues() -> dict[str, str]:
    """Venue names as written in sql/seeds/venues.csv, by their casefolded spelling."""
    with (SEEDS_DIR / "venues.csv").open(encoding="utf-8") as handle:
        return {row["venue"].casefold(): row["venue"] for row in csv.DictReader(handle)}


def venue_from_name(name: str) -> tuple[str, int] | None:
    """Venue and year from a file or folder name: ICLR17_submissions.csv, iclr_2024,
    NeurIPS2023-OpenReviewData, acl-2025-long.jsonl.

    A known venue (sql/seeds/venues.csv) is spelled as listed; a two-digit year is taken
    only after a known venue, so that names such as run01/ or v12.csv say nothing.
    """
    match = NAME_RE.match(name)
    if not match:
        return None
    venue, year = match.group("venue"), int(match.group("year"))
    known = known_venues().get(venue.casefold())
    if year < 100:  # two-digit years: 17 is 2017, 98 is 1998
        if known is None:
            return None
        year += 2000 if year <= 69 else 1900
    return known or venue, year


def metadata_from_path(parts: Sequence[str]) -> tuple[str | None, int | None, str | None]:
    """Venue and year from the components of a path, the file name first, then its folders.

    A component may give both (ICML18_paper.csv, NeurIPS2023-OpenReviewData/) or one: a
    known venue alone (iclr/) or a year alone (2024/). The nearest component wins.

    Returns:
        venue, year, and the components they came from (None where nothing was found).
    """
    venue: str | None = None
    year: int | None = None
    used: list[str] = []
    for part in reversed(parts):
        found_venue, found_year = None, None
        if named := venue_from_name(part):
            found_venue, found_year = named
        elif part.casefold() in known_venues():
            found_venue = known_venues()[part.casefold()]
        elif re.fullmatch(r"(?:19|20)\d{2}", part):
            found_year = int(part)
        if (venue is None and found_venue) or (year is None and found_year):
            used.append(part)
        venue = venue or found_venue
        year = year or found_year
        if venue and year:
            break
    return venue, year, ("/".join(reversed(used)) or None)


def raw_place(path: Path, roots: Sequence[Path]) -> tuple[Path, str]:
    """The raw folder a file was found under and its path below it, in / form.

    A raw file named directly is placed in its own folder. The folder's name and the
    path below it are what may name the file's venue and year, and where a settings
    file for it belongs.
    """
    resolved = path.resolve()
    for root in roots:
        if root.is_dir() and root.resolve() in resolved.parents:
            return root, resolved.relative_to(root.resolve()).as_posix()
    return path.parent, path.name


def load_settings(path: Path) -> list[tuple[str, FileOverride]]:
    """The (glob, override) rules of a paperlake.toml, in file order.

    Raises:
        IngestError: the file is not valid TOML or names an unknown key, format or field.
    """
    try:
        spec = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise IngestError(f"{path}: not valid TOML: {exc}") from None
    unknown = set(spec) - {"files"}
    if unknown:
        raise IngestError(f'{path}: unknown keys {sorted(unknown)}; use [files."<glob>"]')
    rules = []
    for glob, entry in (spec.get("files") or {}).items():
        where = f"{path} [files.{glob!r}]"
        if not isinstance(entry, dict):
            raise IngestError(f"{where}: expected a table of settings")
        bad = set(entry) - {"format", "venue", "year", "columns"}
        if bad:
            raise IngestError(f"{where}: unknown keys {sorted(bad)}")
        fmt = entry.get("format")
        if fmt is not None and fmt not in FORMATS:
            raise IngestError(f"{where}: format {fmt!r} is not one of {', '.join(FORMATS)}")
        columns = entry.get("columns") or {}
        bad = set(columns) - set(SETTING_FIELDS)
        if bad:
            raise IngestError(f"{where}: unknown fields {sorted(bad)} in columns")
        year = entry.get("year")
        if year is not None and not isinstance(year, int):
            raise IngestError(f"{where}: year must be an integer")
        rules.append(
            (
                glob,
                FileOverride(
                    format=fmt,
                    venue=entry.get("venue"),
                    year=year,
                    columns=tuple((SETTING_FIELDS[k], str(v)) for k, v in columns.items()),
                    origin=f"{where}: {json.dumps(entry, sort_keys=True)}",
                ),
            )
        )
    return rules


class Overrides:
    """Per-file settings from the paperlake.toml files beside the raw files.

    A file takes the first matching glob of the nearest settings file, looking in its own
    folder and then in the folders above it, up to the raw path it was found under.
    """

    def __init__(self, roots: Sequence[Path]):
        self.roots = [Path(r).resolve() for r in roots]
        self.loaded: dict[Path, list[tuple[str, FileOverride]]] = {}
        self.errors: dict[Path, str] = {}

    def rules(self, settings: Path) -> list[tuple[str, FileOverride]]:
        """The rules of one settings file, loaded once; a broken file has none."""
        key = settings.resolve()
        if key not in self.loaded:
            try:
                self.loaded[key] = load_settings(settings)
            except (IngestError, OSError) as exc:
                self.loaded[key] = []
                self.errors[key] = str(exc)
        return self.loaded[key]

    def for_file(self, path: Path) -> tuple[FileOverride, Path | None]:
        """The override for a raw file, and the settings file it came from."""
        resolved = path.resolve()
        top = next((r for r in self.roots if r.is_dir() and r in resolved.parents), None)
        folder = resolved.parent
        while True:
            settings = folder / SETTINGS_FILE
            if settings.is_file():
                relative = resolved.relative_to(folder).as_posix()
                for glob, override in self.rules(settings):
                    if fnmatch.fnmatch(relative, glob) or fnmatch.fnmatch(resolved.name, glob):
                        return override, settings
            if top is None or folder == top or folder == folder.parent:
                return NO_OVERRIDE, None
            folder = folder.parent


# ---------------------------------------------------------------------------------------
# Format detection


def open_binary(path: Path, gz: bool, stack: ExitStack) -> tuple[IO[bytes], Callable[[], int]]:
    """The file's bytes (decompressed for gzip) and a function telling how far reading got.

    For gzip the position is in the compressed file; offsets of records are in the
    decompressed stream.
    """
    raw = stack.enter_context(path.open("rb"))
    if not gz:
        return raw, raw.tell
    return stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb")), raw.tell


def sniff(path: Path) -> tuple[bool, bytes]:
    """Whether the file is gzip, and its first bytes (decompressed)."""
    with path.open("rb") as handle:
        head = handle.read(SNIFF_BYTES)
    if head[:2] != b"\x1f\x8b":
        return False, head
    try:
        with gzip.open(path, "rb") as handle:
            return True, handle.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise IngestError(f"gzip data that cannot be decompressed ({exc})") from None


def detect_format(
    head: bytes, name: str = "", override: FileOverride = NO_OVERRIDE
) -> tuple[str, str]:
    """The format of a file from its first bytes, checked against its settings.

    Returns:
        format (one of FORMATS) and, for csv/tsv, the delimiter.

    Raises:
        IngestError: the content is empty, binary or not UTF-8 text, or not the format its
            settings claim.
    """
    columns = override.column_map
    if head[:4] == b"PAR1":
        found: tuple[str, str] = ("parquet", "")
    else:
        text = _text_head(head)
        found = _sniff_json(text) or _sniff_delimited(text, columns) or (_sniff_text(text), "")
    claimed = override.format
    if claimed in ("blocks", "lines"):
        return claimed, ""
    if claimed:
        # Within a family the content decides (JSON Lines or array, comma or tab).
        if FAMILY.get(found[0]) != FAMILY[claimed]:
            raise IngestError(f"settings say {claimed} but the content looks like {found[0]}")
        return found
    expected = _name_family(name)
    if expected == "csv" and FAMILY.get(found[0]) != "csv":
        # A table whose header names no abstract column is still read as a table, so that
        # each row is counted and rejected with the header's names, not taken as prose.
        return _sniff_delimited(_text_head(head), columns, require_abstract=False) or found
    return found


def _name_family(name: str) -> str | None:
    return EXTENSION_FORMATS.get(Path(name.removesuffix(".gz")).suffix.lower())


def name_mismatch(fmt: str, name: str) -> str | None:
    """A note when the file's name promises another format than its content has."""
    expected = _name_family(name)
    if expected is None or FAMILY.get(fmt) == expected:
        return None
    suffix = Path(name.removesuffix(".gz")).suffix.lower()
    return f"named {suffix} but the content is {fmt}; read as {fmt}"


def _text_head(head: bytes) -> str:
    """The first bytes as text, or an error saying why they are not UTF-8 text."""
    if not head.strip():
        raise IngestError("file is empty")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise IngestError("UTF-16 text; paperlake reads UTF-8")
    # Binary formats are full of NUL bytes; a stray one in text is a record's problem.
    if head.count(b"\x00") > max(2, len(head) // 100):
        raise IngestError("binary content (NUL bytes), not text")
    controls = sum(1 for b in head if b < 32 and b not in b"\t\n\r\f")
    if controls > len(head) * 0.05:
        raise IngestError("binary content (control bytes), not text")
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if text.count("\ufffd") > len(text) * 0.3:
        raise IngestError("undecodable: the content is not UTF-8 text")
    return text


def _sniff_json(text: str) -> tuple[str, str] | None:
    start = text.lstrip()
    if start.startswith("["):
        return ("json", "") if re.match(r"\[\s*(?:[{\]]|$)", start) else None
    if not start.startswith("{"):
        return None
    first, newline, _ = start.partition("\n")
    try:
        obj = json.loads(first, parse_int=parse_json_int)
    except (ValueError, RecursionError):
        # A line longer than the sniffed bytes is still JSON Lines; otherwise the objects
        # are pretty-printed and read as a stream of JSON values.
        return ("jsonl", "") if not newline else ("json", "")
    if not isinstance(obj, dict):
        return ("json", "")
    return ("arxiv" if _is_arxiv(obj) else "jsonl"), ""


def _is_arxiv(obj: Mapping) -> bool:
    return "authors_parsed" in obj or {"categories", "versions", "update_date"} <= obj.keys()


def _sniff_delimited(
    text: str,
    columns: Mapping[str, str],
    delimiters: Sequence[str] = ("\t", ",", ";", "|"),
    require_abstract: bool = True,
) -> tuple[str, str] | None:
    """csv or tsv and the delimiter, if the first line is a header with an abstract column
    (or, without `require_abstract`, with at least two columns)."""
    first = text.split("\n", 1)[0].rstrip("\r")
    best: tuple[int, str] | None = None
    for delimiter in delimiters:
        if delimiter not in first:
            continue
        try:
            names = next(csv.reader([first], delimiter=delimiter))
        except csv.Error:
            continue
        score = len(map_columns(names, columns)) if require_abstract else len(names)
        fits = "abstract_raw" in map_columns(names, columns) or not require_abstract
        if fits and (best is None or score > best[0]):
            best = (score, delimiter)
    if best is None:
        return None
    return ("tsv" if best[1] == "\t" else "csv"), best[1]


def _sniff_text(text: str) -> str:
    """blocks (abstracts separated by blank lines) or lines (one abstract per line)."""
    lines = text.splitlines()
    body = lines[1:-1] if lines and parse_header(lines[0]) else lines[:-1]
    return "blocks" if any(not line.strip() for line in body) else "lines"


# ---------------------------------------------------------------------------------------
# Field values


def column_key(name: str) -> str:
    """A column or key name compared case-insensitively: "Paper ID" is paper_id."""
    return re.sub(r"[\s\-]+", "_", str(name).strip().lstrip("\ufeff").casefold())


def map_columns(names: Sequence[str], columns: Mapping[str, str] | None = None) -> dict[str, int]:
    """Which position holds which record field: settings first, then known names.

    An unnamed column (a pandas index) or an unknown one is ignored.
    """
    keys = [column_key(n) for n in names]
    out: dict[str, int] = {}
    for target, name in (columns or {}).items():
        key = column_key(name)
        if key in keys:
            out[target] = keys.index(key)
    taken = set(out.values())
    for i, key in enumerate(keys):
        target = ALIAS_FIELD.get(key)
        if target and target not in out and i not in taken:
            out[target] = i
            taken.add(i)
    return out


def as_text(value: Any, depth: int = 0) -> str | None:
    """A field value as text: numbers without a trailing .0, lists one item per line.

    Whatever the value (nested past any sense, an integer of thousands of digits, a dict
    with tuple keys), the answer is text or None, never an exception.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (list, tuple)):
        if depth >= MAX_VALUE_DEPTH:
            return None
        return "\n".join(t for t in (as_text(v, depth + 1) for v in value) if t is not None)
    try:
        if isinstance(value, dict):
            return json.dumps(value, ensure_ascii=False, default=str)
        return str(value)
    except (TypeError, ValueError, RecursionError):  # odd keys, deep nesting, huge integers
        return f"<{type(value).__name__} that cannot be shown as text>"


def short_text(value: Any) -> str | None:
    """A short field (id, venue, decision): stripped, None when blank."""
    text = as_text(value)
    text = text.strip() if text is not None else None
    return text or None


def parse_list(value: Any, separators: str = r"\s*[;,]\s*") -> list[str]:
    """A list from a JSON list, a Python list literal or a separated string."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        items: Iterable = value
    else:
        text = as_text(value).strip()
        if not text:
            return []
        if text[0] == "[" and text[-1] == "]":
            items = _list_literal(text)
        else:
            items = re.split(separators, text)
    return [s for s in (short_text(i) for i in items) if s]


def _list_literal(text: str) -> list:
    """Items of "["a", "b"]" (JSON) or "['a', 'b']" (Python); else split the inside on commas.

    Brackets nested too deep to parse hold no items.
    """
    try:
        items = json.loads(text, parse_int=parse_json_int)
    except RecursionError:
        return []
    except ValueError:
        try:
            # Literals only: ast.literal_eval evaluates no code.
            items = ast.literal_eval(text) if len(text) < 100_000 else None
        except RecursionError:
            return []
        except (ValueError, TypeError, SyntaxError, MemoryError):
            items = None
    if isinstance(items, (list, tuple)):
        return list(items)
    return [s.strip(" '\"") for s in text[1:-1].split(",")]


def parse_authors(parsed: Any, authors: Any) -> list[str]:
    """Author names, from arXiv's authors_parsed ([last, first, suffix]) where there is one."""
    if isinstance(parsed, (list, tuple)) and parsed:
        names = []
        for item in parsed:
            if isinstance(item, (list, tuple)):
                last, first, suffix = (list(item) + ["", "", ""])[:3]
                parts = (short_text(p) for p in (first, last, suffix))
                names.append(" ".join(p for p in parts if p))
            elif text := short_text(item):
                names.append(text)
        return [n for n in names if n]
    if isinstance(authors, (list, tuple)):
        out = []
        for item in authors:
            if isinstance(item, dict):
                item = item.get("name") or " ".join(
                    str(item[k]) for k in ("given", "first", "family", "last") if item.get(k)
                )
            if text := short_text(item):
                out.append(text)
        return out
    text = short_text(authors)
    if not text:
        return []
    if text.startswith("[") and text.endswith("]"):
        return parse_list(text)
    separator = r"\s*;\s*" if ";" in text else r"\s*,\s*(?:and\s+)?|\s+and\s+"
    return [s for s in (p.strip() for p in re.split(separator, text)) if s]


def parse_year(value: Any) -> int | None:
    """A year from a number, a date or any text holding a four-digit year."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if 1800 <= value <= 2100 else None
    match = YEAR_RE.search(as_text(value) or "")
    return int(match.group(1)) if match else None


class ObjectFields:
    """Record fields from JSON objects or Parquet rows, whatever their keys are called."""

    def __init__(self, columns: Mapping[str, str] | None = None):
        self.columns = dict(columns or {})
        self._keys: dict[tuple, dict[str, str]] = {}

    def keys_for(self, obj: Mapping) -> dict[str, str]:
        """record field -> key of the object, worked out once per set of keys."""
        shape = tuple(obj)
        if shape not in self._keys:
            names = list(obj)
            self._keys[shape] = {f: names[i] for f, i in map_columns(names, self.columns).items()}
        return self._keys[shape]

    def fill(self, record: dict, obj: Any, raw: str | None) -> dict:
        """Put an object's fields into `record`; a non-object or no abstract is a reject."""
        if raw is not None:
            record["raw_snippet"] = raw[:SNIPPET_CHARS]
        if not isinstance(obj, dict):
            record["read_rule"] = "not_a_record"
            record["read_reason"] = f"a JSON {type(obj).__name__} where a record (object) belongs"
            return record
        keys = self.keys_for(obj)
        if "abstract_raw" not in keys:
            record["read_rule"] = "empty_abstract"
            record["read_reason"] = "no abstract field among the keys " + ", ".join(
                str(k) for k in list(obj)[:20]
            )
            return record
        values = {f: obj.get(k) for f, k in keys.items()}
        return fill_fields(record, values, obj)


def fill_fields(
    record: dict, values: Mapping[str, Any], extra: Mapping[str, Any] | None = None
) -> dict:
    """`record` with the fields of `values`; a value that cannot be read makes the record a
    `bad_value` reject carrying the exception, and the file goes on."""
    try:
        record.update(record_fields(values, extra))
    except Exception as exc:  # noqa: BLE001 - one record's values, reported on that record
        record["read_rule"] = "bad_value"
        record["read_reason"] = f"a field value could not be read: {type(exc).__name__}: {exc}"
    return record


def record_fields(values: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> dict:
    """Raw record columns from field values; `extra` holds arXiv's authors_parsed and dates."""
    extra = extra or {}
    year = parse_year(values.get("year"))
    venue = short_text(values.get("venue"))
    if _is_arxiv(extra):
        versions = extra.get("versions")
        first = (
            versions[0].get("created")
            if isinstance(versions, list) and versions and isinstance(versions[0], dict)
            else None
        )
        year = year or parse_year(first) or parse_year(extra.get("update_date"))
        venue = venue or "arXiv"
    return {
        "external_id": short_text(values.get("external_id")),
        "title_raw": as_text(values.get("title_raw")),
        "abstract_raw": as_text(values.get("abstract_raw")),
        "authors": parse_authors(extra.get("authors_parsed"), values.get("authors")),
        "keywords": parse_list(values.get("keywords")),
        "categories": parse_list(values.get("categories"), r"[\s,;]+"),
        "decision": short_text(values.get("decision")),
        "venue": venue,
        "year": year,
    }


# ---------------------------------------------------------------------------------------
# Readers: each yields raw records (dicts of RECORD_SCHEMA columns) with line and offset


def numbered_lines(stream: IO[bytes]) -> Iterator[tuple[int, int, bytes]]:
    """(1-based line number, byte offset, line) for every line of a binary stream."""
    offset = 0
    for line_no, line in enumerate(stream, start=1):
        yield line_no, offset, line
        offset += len(line)


def snippet(raw: bytes | str) -> str:
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    return text[:SNIPPET_CHARS]


def read_text(stream: IO[bytes], fmt: str, has_header: bool) -> Iterator[dict]:
    """Records of the sample format (blank-line blocks) or of one abstract per line."""
    block: list[bytes] = []
    block_line = block_offset = 0

    def record() -> dict:
        raw = b"".join(block)
        try:
            text, error = raw.decode("utf-8"), None
        except UnicodeDecodeError as exc:
            text = raw.decode("utf-8", errors="replace")
            error = f"invalid UTF-8 at byte {block_offset + exc.start}"
        return {"line": block_line, "byte_offset": block_offset, "abstract_raw": text} | (
            {"decode_error": error} if error else {}
        )

    for line_no, start, line in numbered_lines(stream):
        if line_no == 1 and has_header:
            continue
        if fmt == "lines" or not line.strip(b"\r\n"):
            if block:
                yield record()
                block = []
            if fmt == "blocks":
                continue
        if not block:
            block_line, block_offset = line_no, start
        block.append(line)
        if fmt == "lines":
            yield record()
            block = []
    if block:
        yield record()


def read_jsonl(stream: IO[bytes], fields: ObjectFields) -> Iterator[dict]:
    """Records of JSON Lines: one object a line; blank lines are not records."""
    for line_no, offset, line in numbered_lines(stream):
        if not line.strip():
            continue
        record: dict = {"line": line_no, "byte_offset": offset}
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            record["decode_error"] = f"invalid UTF-8 at byte {offset + exc.start}"
            record["raw_snippet"] = snippet(line)
            yield record
            continue
        try:
            obj = json.loads(text, parse_int=parse_json_int)
        except (ValueError, RecursionError) as exc:
            record["read_rule"] = "invalid_json"
            record["read_reason"] = f"invalid JSON: {_json_error(exc)}"
            record["raw_snippet"] = snippet(text)
            yield record
            continue
        yield fields.fill(record, obj, text)


def _json_error(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)


def parse_json_int(text: str) -> int | float:
    """A JSON integer; one too long for Python's int conversion becomes a float (inf)."""
    return int(text) if len(text) < 4000 else float(text)


def read_json_stream(stream: IO[bytes], fields: ObjectFields) -> Iterator[dict]:
    """Records of a JSON array (or of JSON values one after another), read in chunks.

    Where a value does not parse, the rest of the file cannot be split into records: it
    becomes one rejected record at that place.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    parser = json.JSONDecoder(parse_int=parse_json_int)
    skip = re.compile(r"[\s,]*")
    buf, pos, eof = "", 0, False
    byte_at, line_at = 0, 1  # where buf[pos] lies in the file
    opened = False

    def advance(to: int) -> None:
        nonlocal pos, byte_at, line_at
        passed = buf[pos:to]
        byte_at += len(passed.encode("utf-8", "surrogateescape"))
        line_at += passed.count("\n")
        pos = to

    def fill() -> None:
        nonlocal buf, pos, eof
        data = stream.read(JSON_CHUNK)
        eof = not data
        buf = buf[pos:] + decoder.decode(data, final=eof)
        pos = 0

    while True:
        advance(skip.match(buf, pos).end())
        if pos >= len(buf):
            if eof:
                return
            fill()
            continue
        if buf[pos] == "[" and not opened:
            opened = True
            advance(pos + 1)
            continue
        if buf[pos] == "]" and opened:
            advance(pos + 1)
            continue
        try:
            obj, end = parser.raw_decode(buf, pos)
        except (ValueError, RecursionError) as exc:
            resume = _next_record_start(buf, pos)
            truncated = isinstance(exc, json.JSONDecodeError)
            if truncated and resume is None and not eof and len(buf) - pos < JSON_MAX_RECORD:
                fill()
                continue
            record = {
                "line": line_at,
                "byte_offset": byte_at,
                "read_rule": "invalid_json",
                "raw_snippet": _valid(buf[pos : pos + SNIPPET_CHARS]),
            }
            if isinstance(exc, json.JSONDecodeError):
                line = exc.lineno - buf.count("\n", 0, pos)
                where = f"invalid JSON: {exc.msg} at line {line} of the record"
            else:
                where = f"invalid JSON: {_json_error(exc)}"
            if resume is None:
                yield record | {
                    "read_reason": f"{where}; the rest of the file could not be split into records"
                }
                return
            yield record | {"read_reason": f"{where}; reading goes on at the next record"}
            advance(resume)
            continue
        if end == len(buf) and not eof:
            fill()  # a number or literal at the end of the buffer may continue
            continue
        record: dict = {"line": line_at, "byte_offset": byte_at}
        raw = buf[pos:end]
        advance(end)
        try:
            raw.encode("utf-8")
        except UnicodeEncodeError as exc:
            before = len(raw[: exc.start].encode("utf-8", "surrogateescape"))
            record["decode_error"] = f"invalid UTF-8 at byte {record['byte_offset'] + before}"
            raw = _valid(raw)
            obj = json.loads(raw, parse_int=parse_json_int)
        yield fields.fill(record, obj, raw)


def _next_record_start(buf: str, pos: int) -> int | None:
    """Where the record after a broken one starts: the next line that opens an object at
    the broken record's indentation (pretty-printed JSON), if the buffer holds one."""
    line_start = buf.rfind("\n", 0, pos) + 1
    indent = buf[line_start:pos]
    if indent.strip():
        return None  # the record does not start its line: no layout to resume by
    found = buf.find(f"\n{indent}{{", pos + 1)
    return None if found < 0 else found + 1


def _valid(text: str) -> str:
    """Text with undecodable bytes (surrogate escapes) shown as U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", errors="replace")


class LineFeed:
    """Lines of a binary stream, decoded for the csv module, remembering their bytes.

    The csv module pulls exactly the lines of one record, so the feed knows where each
    record starts (line and byte offset) and what its raw bytes were.
    """

    def __init__(self, stream: IO[bytes]):
        self.lines = iter(stream)
        self.line_no = 0
        self.offset = 0
        self.raw: list[bytes] = []

    def __iter__(self) -> LineFeed:
        return self

    def __next__(self) -> str:
        line = next(self.lines)
        self.line_no += 1
        self.offset += len(line)
        self.raw.append(line)
        # Undecodable bytes travel as surrogate escapes and are reported per record.
        return line.decode("utf-8", "surrogateescape")


def read_delimited(stream: IO[bytes], delimiter: str, columns: Mapping[str, str]) -> Iterator[dict]:
    """Records of CSV/TSV with a header; a quoted field may span lines.

    A row with too many fields is repaired when an id or link column pins down which
    field's commas shifted the rest; otherwise it is rejected, as are rows with too few.
    """
    csv.field_size_limit(CSV_FIELD_LIMIT)
    feed = LineFeed(stream)
    # strict: a quote in the wrong place is an error for that row, where a lenient reader
    # would silently run the following rows into one field.
    reader = csv.reader(feed, delimiter=delimiter, strict=True)
    try:
        header = next(reader, [])
    except csv.Error as exc:
        raise IngestError(f"the header line cannot be read as CSV: {exc}") from None
    if header:
        header[0] = header[0].lstrip("\ufeff")
    positions = map_columns(header, columns)
    anchors = anchor_columns(header, positions)
    width = len(header)
    while True:
        line, offset = feed.line_no + 1, feed.offset
        feed.raw.clear()
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield {
                "line": line,
                "byte_offset": offset,
                "read_rule": "unparseable_row",
                "read_reason": f"CSV error: {exc}",
                "raw_snippet": snippet(b"".join(feed.raw)),
            }
            reader = csv.reader(feed, delimiter=delimiter, strict=True)
            continue
        if not row or (len(row) == 1 and not row[0].strip()):
            continue  # a blank line holds no record
        raw = b"".join(feed.raw)
        record: dict = {"line": line, "byte_offset": offset, "raw_snippet": snippet(raw)}
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            record["decode_error"] = f"invalid UTF-8 at byte {offset + exc.start}"
            row = [_valid(value) for value in row]
        if len(row) != width:
            text = _valid(raw.decode("utf-8", "surrogateescape")).rstrip("\r\n")
            fixed, problem = repair_row(text, delimiter, width, anchors)
            if fixed is None:
                record["read_rule"] = "wrong_field_count"
                record["read_reason"] = (
                    f"row has {len(row)} fields, the header has {width}; {problem}"
                )
                yield record
                continue
            row = fixed
            record["read_flags"] = ["repaired_fields"]
        if "abstract_raw" not in positions:
            record["read_rule"] = "empty_abstract"
            record["read_reason"] = "no abstract column among the header's columns " + ", ".join(
                header[:20]
            )
            yield record
            continue
        yield fill_fields(record, {f: row[i] for f, i in positions.items()})


def anchor_columns(header: Sequence[str], positions: Mapping[str, int]) -> dict[int, str]:
    """Columns that hold one field each, by position: those whose values have a known shape
    (id, link, year) and short labels (venue, decision) that carry no delimiter."""
    anchors = {i: "url" for i, name in enumerate(header) if column_key(name) in URL_COLUMNS}
    for name, kind in (("venue", "label"), ("decision", "label"), ("external_id", "id")):
        if name in positions:
            anchors[positions[name]] = kind
    if "year" in positions:
        anchors[positions["year"]] = "year"
    return anchors


def split_fields(text: str, delimiter: str) -> list[tuple[str, bool]]:
    """The fields of one CSV record, each with whether it was quoted."""
    fields: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while True:
        if i < n and text[i] == '"':
            j, value = i + 1, []
            while j < n:
                if text[j] == '"':
                    if text[j + 1 : j + 2] == '"':
                        value.append('"')
                        j += 2
                        continue
                    break
                value.append(text[j])
                j += 1
            end = text.find(delimiter, j)
            end = n if end < 0 else end
            fields.append(("".join(value) + text[j + 1 : end], True))
        else:
            end = text.find(delimiter, i)
            end = n if end < 0 else end
            fields.append((text[i:end], False))
        if end >= n:
            return fields
        i = end + 1


def repair_row(
    text: str, delimiter: str, width: int, anchors: Mapping[int, str]
) -> tuple[list[str] | None, str]:
    """Rejoin a row that unquoted delimiters split into too many fields.

    Every anchor column (id, link, year, label) takes one field of its shape; the other
    columns absorb the surplus, rejoining neighbouring unquoted fields. A reading is
    accepted when it is the only one, either among those that rejoin exactly where a
    delimiter sits inside prose (followed by a space, or a thousands separator as in
    72,413) and split everywhere else, or among all readings.

    Returns:
        the repaired values (or None) and, when None, why no repair was made.
    """
    if not any(kind in ("id", "url") for kind in anchors.values()):
        return None, "no id or link column to anchor a repair"
    fields = split_fields(text, delimiter)
    extra = len(fields) - width
    if extra <= 0:
        return None, "too few fields to repair"
    if extra > MAX_SURPLUS_FIELDS:
        return None, f"{extra} surplus fields, more than {MAX_SURPLUS_FIELDS} to rejoin"
    if fixed := _rejoin_prose(fields, width, anchors, delimiter):
        return fixed, ""
    readings = _rejoinings(fields, width, anchors, delimiter)
    if len(readings) == 1:
        return readings[0], ""
    if not readings:
        return None, "no rejoining of fields fits the id and link columns"
    return None, "more than one way to rejoin the fields fits the id and link columns"


def _fits(value: str, kind: str | None) -> bool:
    return kind is None or bool(ANCHOR_SHAPES[kind].match(value))


def _rejoin_prose(
    fields: list[tuple[str, bool]], width: int, anchors: Mapping[int, str], delimiter: str
) -> list[str] | None:
    """The reading that rejoins fields exactly where the delimiter sits inside prose."""
    groups: list[list[tuple[str, bool]]] = [[fields[0]]]
    for before, after in itertools.pairwise(fields):
        value, quoted = after
        prose = value[:1].isspace() or (
            before[0][-1:].isdigit() and THOUSANDS_RE.match(value) is not None
        )
        inside = prose and not quoted and not before[1]
        if inside:
            groups[-1].append(after)
        else:
            groups.append([after])
    if len(groups) != width:
        return None
    values = []
    for column, group in enumerate(groups):
        kind = anchors.get(column)
        value = delimiter.join(v for v, _ in group)
        if (len(group) > 1 and kind is not None) or not _fits(value, kind):
            return None
        values.append(value)
    return values


def _rejoinings(
    fields: list[tuple[str, bool]], width: int, anchors: Mapping[int, str], delimiter: str
) -> list[list[str]]:
    """Readings of the row that fit the anchor columns: none, one, or two (of maybe more)."""
    n = len(fields)

    def spans(column: int, start: int) -> Iterator[tuple[int, str]]:
        """(end, value) of the fields column `column` may take from `start` on."""
        kind = anchors.get(column)
        longest = 1 if kind is not None else n - start - (width - column - 1)
        for end in range(start + 1, start + longest + 1):
            if end - start > 1 and (fields[start][1] or fields[end - 1][1]):
                return  # a quoted field is whole: it is never rejoined with another
            value = delimiter.join(v for v, _ in fields[start:end])
            if _fits(value, kind):
                yield end, value

    # ways[column][start]: readings of columns `column`.. over fields `start`.., counted up
    # to two. Column c starts between field c and field c + surplus.
    extra = n - width
    ways = [dict.fromkeys(range(c, c + extra + 1), 0) for c in range(width)] + [{n: 1}]
    for column in range(width - 1, -1, -1):
        for start in ways[column]:
            total = 0
            for end, _ in spans(column, start):
                total += ways[column + 1].get(end, 0)
                if total >= 2:
                    break
            ways[column][start] = min(total, 2)
    found = ways[0][0]
    if found != 1:
        return [[]] * found
    values, start = [], 0
    for column in range(width):
        end, value = next((e, v) for e, v in spans(column, start) if ways[column + 1].get(e, 0))
        values.append(value)
        start = end
    return [values]


def read_parquet(path: Path, fields: ObjectFields) -> Iterator[dict]:
    """Records of a Parquet file, row group by row group.

    A record's line is its 1-based row number; its byte offset is where its row group's
    data starts in the file.
    """
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    row = 0
    for group in range(parquet.num_row_groups):
        chunk = parquet.metadata.row_group(group).column(0)
        offset = (
            chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
        )
        for batch in parquet.iter_batches(batch_size=10_000, row_groups=[group]):
            for obj in batch.to_pylist():
                row += 1
                record = {"line": row, "byte_offset": offset}
                yield fields.fill(record, obj, json.dumps(obj, default=str)[:SNIPPET_CHARS])


# ---------------------------------------------------------------------------------------
# Cleaning


def _unescape_entities(series: pl.Series) -> pl.Series:
    """HTML entities decoded (&amp; is &, &#8201; a thin space); only where an & occurs."""
    return pl.Series(
        series.name,
        [html.unescape(v) if v is not None and "&" in v else v for v in series.to_list()],
        dtype=pl.String,
    )


def _accent_table() -> tuple[list[str], list[str]]:
    """TeX accent spellings (\\'e, \\'{e}, {\\'e}, \\c{c}) and the letters they stand for."""
    import unicodedata

    patterns, letters = [], []
    for accent, mark in TEX_ACCENTS.items():
        for base in "aeiouycnszrgklAEIOUYCNSZRGKL":
            composed = unicodedata.normalize("NFC", base + mark)
            if len(composed) != 1:
                continue
            forms = [f"{{\\{accent}{{{base}}}}}", f"\\{accent}{{{base}}}", f"{{\\{accent}{base}}}"]
            if not accent.isalpha():
                forms.append(f"\\{accent}{base}")  # \c c needs braces or a space: not bare
            else:
                forms.append(f"{{\\{accent} {base}}}")
            patterns.extend(forms)
            letters.extend([composed] * len(forms))
    return patterns, letters


TEX_ACCENT_PATTERNS, TEX_ACCENT_LETTERS = _accent_table()


def clean_text(column: str) -> pl.Expr:
    """Plain readable text from raw text with LaTeX, markdown or HTML in it.

    HTML entities are decoded and tags stripped; LaTeX macros, accents and math symbols
    are resolved; hyphenated line breaks are joined; Unicode spaces become plain spaces;
    control, private-use and invisible characters go; whitespace collapses; NFC.
    """
    expr = pl.col(column).fill_null("").map_batches(_unescape_entities, return_dtype=pl.String)
    expr = expr.str.replace_all(INLINE_TAG_RE, "").str.replace_all(BLOCK_TAG_RE, " ")
    expr = expr.str.replace_many(TEX_ACCENT_PATTERNS, TEX_ACCENT_LETTERS)
    for _ in range(3):  # nested macros such as \textbf{\texttt{X} y}
        expr = expr.str.replace_all(rf"\\(?:{TEXT_MACROS})\s*\{{([^{{}}]*)\}}", "${1}")
    expr = (
        expr.str.replace_all(r"\\url\{([^{}]*)\}", "${1}")
        .str.replace_all(r"\\href\{([^{}]*)\}\{([^{}]*)\}", "${2} (${1})")
        .str.replace_all(r"\*\*([^*\n]+?)\*\*", "${1}")
        .str.replace_all(r"``|''", '"')
    )
    # Longest names first, so that \\varepsilon is not read as \\var + epsilon.
    macros = sorted(MATH_SYMBOLS, key=len, reverse=True)
    expr = expr.str.replace_many([f"\\{m}" for m in macros], [MATH_SYMBOLS[m] for m in macros])
    expr = (
        expr.str.replace_all(r"\\([%&_#$])", "${1}")
        .str.replace_all(r"\$([^$]*)\$", "${1}")
        .str.replace_all(r"[{}]", "")
        # A word hyphenated across a line break keeps its hyphen and loses the break.
        .str.replace_all(r"(\pL)-[ \t]*\r?\n\s*(\pL)", "${1}-${2}")
        .str.replace_all(CONTROL_RE, "")
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
        .str.normalize("NFC")
    )
    return expr


def classify_link(url: str) -> str:
    """code | review | web | broken, by the link's host; a link that does not parse
    (http://[broken) is broken."""
    try:
        host = (urlparse(url).hostname or "").lower()
    except ValueError:
        return "broken"
    if not host or "." not in host:
        return "broken"
    host = host.removeprefix("www.")
    if host in CODE_HOSTS:
        return "code"
    if host in REVIEW_HOSTS:
        return "review"
    return "web"


def extract_links(text: str | None) -> list[dict]:
    """Every http(s) link in the text with its kind, trailing punctuation trimmed."""
    links = []
    for raw in re.findall(URL_RE, text or ""):
        url = raw.rstrip(URL_TRAILING)
        links.append({"url": url, "kind": classify_link(url)})
    return links


def content_id(title: str | None, abstract: str) -> str:
    """Stable paper id: sha256 of casefolded, whitespace-collapsed title and abstract."""
    norm = " ".join(f"{title or ''}\x1f{abstract}".casefold().split())
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()[:16]


def with_flags(accepted: pl.DataFrame, min_words: int) -> pl.DataFrame:
    """Flags for accepted abstracts that look damaged; flagged records are still accepted.

    missing_letter:<c>: a common letter absent from a long abstract (a lost character);
    all_lowercase: no capital letter at all; mostly_markup: half the raw text is markup;
    short_abstract: a titled record whose abstract has fewer than `min_words` words;
    plus what readers flagged (repaired_fields).
    """
    raw = pl.col("abstract_raw").fill_null("")
    # Helper columns first: an eager frame does not share repeated subexpressions.
    helped = accepted.with_columns(
        _lower=pl.col("abstract").str.to_lowercase(),
        _letters=pl.col("abstract").str.replace_all(r"[^A-Za-z]+", "").str.len_bytes(),
        _raw_len=raw.str.len_chars(),
        _markup=raw.str.len_chars() - raw.str.replace_all(MARKUP_RE, "").str.len_chars(),
    )
    letters, raw_len = pl.col("_letters"), pl.col("_raw_len")
    flags = [
        pl.when((letters >= 200) & ~pl.col("_lower").str.contains(letter, literal=True)).then(
            pl.lit(f"missing_letter:{letter}")
        )
        for letter in COMMON_LETTERS
    ]
    flags += [
        pl.when((letters >= 50) & ~pl.col("abstract").str.contains(r"\p{Lu}")).then(
            pl.lit("all_lowercase")
        ),
        pl.when((raw_len >= 40) & (pl.col("_markup") * 2 >= raw_len)).then(pl.lit("mostly_markup")),
        pl.when(pl.col("title").is_not_null() & (pl.col("word_count") < min_words)).then(
            pl.lit("short_abstract")
        ),
    ]
    read_flags = pl.col("read_flags").fill_null(pl.lit([], dtype=pl.List(pl.String)))
    return helped.with_columns(
        flags=pl.concat_list(flags).list.drop_nulls().list.concat(read_flags)
    ).drop("_lower", "_letters", "_raw_len", "_markup")


def normalise(
    records: pl.DataFrame, min_words: int, max_words: int | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Clean raw records and split them into accepted and rejected.

    A record without a title needs `min_words` words (a shorter block is more likely a
    stray line than an abstract); a titled record is a paper whatever its length, and a
    short abstract is flagged instead.

    Returns:
        accepted records with paper_id, title, abstract, word_count, links,
        unresolved_macros, flags and control_chars_removed; rejects with the rule each
        record broke.
    """
    title = clean_text("title_raw").str.replace(r"([^.])\.$", "${1}")  # "Title." is "Title"
    cleaned = (
        records.with_columns(
            control_chars_removed=(
                pl.col("title_raw").fill_null("").str.count_matches(CONTROL_RE)
                + pl.col("abstract_raw").fill_null("").str.count_matches(CONTROL_RE)
            ).cast(pl.Int32),
            title=pl.when(pl.col("title_raw").is_not_null()).then(title),
            abstract=clean_text("abstract_raw"),
        )
        .with_columns(title=pl.when(pl.col("title") != "").then(pl.col("title")))
        .with_columns(
            word_count=pl.col("abstract").str.count_matches(r"\S+").cast(pl.Int32),
            links=pl.col("abstract").map_elements(extract_links, return_dtype=LINK_DTYPE),
            unresolved_macros=pl.col("abstract")
            .str.extract_all(r"\\[A-Za-z]+")
            .list.unique(maintain_order=True),
        )
    )
    too_short = (pl.col("word_count") < min_words) & pl.col("title").is_null()
    too_long = pl.col("word_count") > max_words if max_words else pl.lit(False)
    rule = (
        pl.when(pl.col("read_rule").is_not_null())
        .then(pl.col("read_rule"))
        .when(pl.col("decode_error").is_not_null())
        .then(pl.lit("invalid_utf8"))
        .when(pl.col("abstract") == "")
        .then(pl.lit("empty_abstract"))
        .when(too_short)
        .then(pl.lit("too_short"))
        .when(too_long)
        .then(pl.lit("too_long"))
    )
    reason = (
        pl.when(pl.col("read_rule").is_not_null())
        .then(pl.col("read_reason"))
        .when(pl.col("decode_error").is_not_null())
        .then(pl.col("decode_error"))
        .when(pl.col("abstract") == "")
        .then(pl.lit("abstract is empty or whitespace only"))
        .when(too_short)
        .then(
            pl.format(
                "abstract has {} words, fewer than the minimum of {}",
                pl.col("word_count"),
                pl.lit(min_words),
            )
        )
        .when(too_long)
        .then(
            pl.format(
                "abstract has {} words, more than the maximum of {}",
                pl.col("word_count"),
                pl.lit(max_words),
            )
        )
    )
    cleaned = cleaned.with_columns(rule=rule, reason=reason)
    rejects = cleaned.filter(pl.col("rule").is_not_null()).select(
        "source_path",
        "source_sha256",
        "record_no",
        "line",
        "byte_offset",
        "rule",
        "reason",
        raw_snippet=pl.coalesce("raw_snippet", pl.col("abstract_raw").str.slice(0, SNIPPET_CHARS)),
    )
    accepted = (
        with_flags(cleaned.filter(pl.col("rule").is_null()), min_words)
        .drop("rule", "reason", "decode_error", "read_rule", "read_reason", "raw_snippet")
        .drop("read_flags")
    )
    accepted = accepted.with_columns(
        paper_id=pl.struct("title", "abstract").map_elements(
            lambda r: content_id(r["title"], r["abstract"]), return_dtype=pl.String
        )
    )
    return accepted, rejects


def normalise_contained(
    records: pl.DataFrame, min_words: int, max_words: int | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`normalise`, where a record whose cleaning fails becomes a `cleaning_error` reject
    (with the exception) instead of failing its batch and file."""
    try:
        return normalise(records, min_words, max_words)
    except Exception:  # noqa: BLE001 - find the records at fault one by one
        pass
    accepted, rejected = [], []
    for i in range(records.height):
        row = records.slice(i, 1)
        try:
            ok, bad = normalise(row, min_words, max_words)
        except Exception as exc:  # noqa: BLE001 - one record's failure, reported on it
            reason = f"cleaning failed: {type(exc).__name__}: {exc}"
            ok, bad = (
                None,
                row.select(
                    *REJECT_SCHEMA.keys() - {"rule", "reason", "raw_snippet"},
                    rule=pl.lit("cleaning_error"),
                    reason=pl.lit(reason[:1000]),
                    raw_snippet=pl.coalesce(
                        "raw_snippet", pl.col("abstract_raw").str.slice(0, SNIPPET_CHARS)
                    ),
                ).select(list(REJECT_SCHEMA)),
            )
        if ok is not None:
            accepted.append(ok)
        rejected.append(bad)
    schema = accepted_schema(min_words)
    return _concat(accepted, schema), _concat(rejected, REJECT_SCHEMA)


# ---------------------------------------------------------------------------------------
# Files into batches, batches into Parquet parts

RAW_COLUMNS = [c for c in RECORD_SCHEMA if c not in ("source_path", "source_sha256")]
LIST_COLUMNS = [c for c, t in RECORD_SCHEMA.items() if t == pl.List(pl.String)]


def record_batches(records: Iterator[dict], source: SourceFile) -> Iterator[pl.DataFrame]:
    """Raw records in batches of RECORD_SCHEMA, numbered, with the file's venue and year.

    Venue and year: the record's own, else the file's (see `file_metadata`). Where the
    reader fails after some records, the rest of the file becomes one `unreadable_rest`
    reject and the records before it are kept; a reader that fails at once fails the file.
    """
    rows: list[dict] = []
    chars = 0
    record_no = 0
    last: dict = {}
    while True:
        try:
            record = next(records)
        except StopIteration:
            break
        except Exception as exc:  # noqa: BLE001 - any reader failure ends the file, not the run
            if not record_no:
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
        rows.append(record)
        chars += len(record.get("abstract_raw") or "") + len(record.get("title_raw") or "")
        if len(rows) >= BATCH_RECORDS or chars >= BATCH_CHARS:
            yield _records_frame(rows, source)
            rows, chars = [], 0
    if rows:
        yield _records_frame(rows, source)


def _records_frame(rows: list[dict], source: SourceFile) -> pl.DataFrame:
    """A batch of raw records as a frame; a record whose values do not fit the schema
    becomes a `bad_value` reject, not the batch's failure."""
    try:
        frame = _frame(rows)
    except Exception:  # noqa: BLE001 - find the records at fault one by one
        frame = pl.concat([_frame([row], isolate=True) for row in rows], how="vertical_relaxed")
    return frame.with_columns(
        source_path=pl.lit(source.path),
        source_sha256=pl.lit(source.sha256),
        venue=pl.coalesce(pl.col("venue"), pl.lit(source.venue, dtype=pl.String)),
        year=pl.coalesce(pl.col("year"), pl.lit(source.year, dtype=pl.Int32)),
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


def file_records(
    path: Path, layout: Layout, override: FileOverride, has_header: bool, stack: ExitStack
) -> tuple[Iterator[dict], Callable[[], int]]:
    """The raw records of a file in its layout, and a function telling bytes read so far."""
    if layout.format == "parquet":
        target = path
        if layout.gzip:  # Parquet needs random access: decompress to a temporary file
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            target = folder / "data.parquet"
            with gzip.open(path, "rb") as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        return read_parquet(target, ObjectFields(override.column_map)), lambda: 0
    stream, position = open_binary(path, layout.gzip, stack)
    fields = ObjectFields(override.column_map)
    if layout.format in ("jsonl", "arxiv"):
        return read_jsonl(stream, fields), position
    if layout.format == "json":
        return read_json_stream(stream, fields), position
    if layout.format in ("csv", "tsv"):
        return read_delimited(stream, layout.delimiter, override.column_map), position
    return read_text(stream, layout.format, has_header), position


class PartWriter:
    """Accepted records of one file written as numbered Parquet parts in a folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.names: list[str] = []

    def write(self, frame: pl.DataFrame) -> None:
        if frame.height == 0:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"records-{len(self.names):05d}.parquet"
        frame.write_parquet(self.folder / name)
        self.names.append(name)

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        self.names = []


def file_metadata(
    header: tuple[str, int] | None,
    override: FileOverride,
    parts: Sequence[str],
    fmt: str,
) -> tuple[str | None, int | None, str | None]:
    """A file's venue and year for records that carry none: from its header line, else its
    settings, else its path (folder and file names), else its format (arXiv).

    Returns:
        venue, year, and where they came from (None where nothing gave them).
    """
    path_venue, path_year, used = metadata_from_path(parts)
    places = (
        ("header line", *(header or (None, None))),
        (SETTINGS_FILE, override.venue, override.year),
        (f"path {used}", path_venue, path_year),
        ("arXiv format", "arXiv" if fmt == "arxiv" else None, None),
    )
    venue = next(((v, where) for where, v, _ in places if v), (None, None))
    year = next(((y, where) for where, _, y in places if y), (None, None))
    if venue[1] == year[1]:
        origin = venue[1]
    else:
        origin = (
            ", ".join(
                f"{what} from {where}"
                for what, (_, where) in (("venue", venue), ("year", year))
                if where
            )
            or None
        )
    return venue[0], year[0], origin


def metadata_warning(source: SourceFile, folder: Path, relative: str) -> str | None:
    """What to tell a user whose file left accepted records without venue or year."""
    missing = [
        (name, count, example)
        for name, count, example in (
            ("venue", source.no_venue, 'venue = "<venue>"'),
            ("year", source.no_year, "year = <year>"),
        )
        if count
    ]
    if not missing:
        return None
    what = " and ".join(f"{count} no {name}" for name, count, _ in missing)
    setting = ", ".join(example for *_, example in missing)
    return (
        f"of {source.accepted} accepted records, {what}; set them in "
        f'{folder / SETTINGS_FILE}: files."{relative}" = {{ {setting} }}'
    )


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
    records and nothing left in `writer`; a bad record costs that record alone.

    Args:
        parts: the path components that may name the file's venue and year.
    """
    source = SourceFile(path=str(path), sha256=sha, bytes=size)
    rejected: list[pl.DataFrame] = []
    flags: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    notes: list[str] = []
    try:
        gz, head = sniff(path)
        fmt, delimiter = detect_format(head, path.name, override)
        layout = Layout(fmt, gz, delimiter or ",")
        source.format = layout.label
        header = None
        if fmt in ("blocks", "lines"):
            first_line = head.split(b"\n", 1)[0].decode("utf-8", errors="replace")
            header = parse_header(first_line.lstrip("\ufeff"))
        source.venue, source.year, source.metadata_from = file_metadata(
            header, override, parts or [path.name], fmt
        )
        with ExitStack() as stack:
            records, position = file_records(path, layout, override, header is not None, stack)
            for batch in record_batches(records, source):
                ok, bad = normalise_contained(batch, min_words, max_words)
                writer.write(ok)
                rejected.append(bad)
                source.records_seen += batch.height
                source.accepted += ok.height
                source.rejected += bad.height
                source.control_chars_removed += int(ok["control_chars_removed"].sum())
                source.no_venue += ok["venue"].null_count()
                source.no_year += ok["year"].null_count()
                flags.update(ok["flags"].explode().drop_nulls().to_list())
                rules.update(bad["rule"].to_list())
                if progress:
                    progress(source.path, position(), size)
    except FILE_ERRORS as exc:
        writer.discard()
        failed = SourceFile(path=source.path, sha256=sha, bytes=size, format=source.format)
        failed.error = f"{path}: {exc}"
        return failed, []
    source.rejected_by_rule = dict(sorted(rules.items()))
    source.flag_counts = dict(sorted(flags.items()))
    if "unreadable_rest" in rules:
        notes.append("reading stopped early; see rejects (unreadable_rest)")
    source.warning = "; ".join(notes) or None
    if progress:
        progress(source.path, size, size)
    return source, rejected


class ParseCache:
    """Parsed records of file versions already seen, keyed by content hash and ingest config.

    A file whose bytes (and settings) did not change is not parsed again; its records are
    read back and given the file's current path. Layout: `<key>/records-*.parquet` and
    `<key>/rejects.parquet`, with `<key>.json` (the file's sources row) written last.
    """

    def __init__(self, folder: Path, min_words: int, max_words: int | None = None):
        self.folder = folder
        self.config = f"{INGEST_VERSION}:{min_words}:{max_words}"

    def key(
        self, sha256: str, override: FileOverride = NO_OVERRIDE, parts: Sequence[str] = ()
    ) -> str:
        # The venue and year a file's path gives are part of its parse.
        spec = f"{sha256}:{self.config}:{override.origin}:{metadata_from_path(parts)[:2]}"
        return hashlib.sha256(spec.encode()).hexdigest()[:32]

    def load(
        self, source: SourceFile, override: FileOverride = NO_OVERRIDE, parts: Sequence[str] = ()
    ) -> tuple[SourceFile, list[Path], pl.DataFrame] | None:
        """The cached sources row, record parts and rejects of a file version, if any."""
        key = self.key(source.sha256, override, parts)
        meta = self.folder / f"{key}.json"
        if not meta.exists():
            return None
        spec = json.loads(meta.read_text())
        names = spec.pop("parts")
        cached = SourceFile(**spec)
        cached.path = source.path
        rejects = pl.read_parquet(self.folder / key / "rejects.parquet").with_columns(
            source_path=pl.lit(source.path)
        )
        return cached, [self.folder / key / n for n in names], rejects

    def writer(
        self, sha256: str, override: FileOverride = NO_OVERRIDE, parts: Sequence[str] = ()
    ) -> PartWriter:
        """Where a parse being cached writes its parts (renamed into place by `store`)."""
        key = self.key(sha256, override, parts)
        return PartWriter(self.folder / f"{key}.tmp-{os.getpid()}")

    def store(
        self,
        source: SourceFile,
        writer: PartWriter,
        rejects: pl.DataFrame,
        override: FileOverride = NO_OVERRIDE,
        parts: Sequence[str] = (),
    ) -> list[Path]:
        """Move a finished parse into place, the index file last; returns the parts' paths."""
        key = self.key(source.sha256, override, parts)
        target = self.folder / key
        writer.folder.mkdir(parents=True, exist_ok=True)
        rejects.write_parquet(writer.folder / "rejects.parquet")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(writer.folder, target)
        spec = {k: v for k, v in vars(source).items() if k != "cached"} | {"parts": writer.names}
        tmp = self.folder / f"{key}.json.tmp"
        tmp.write_text(json.dumps(spec))
        os.replace(tmp, self.folder / f"{key}.json")
        return [target / n for n in writer.names]


def ingest(
    paths: Iterable[Path],
    min_words: int = 20,
    cache_dir: Path | None = None,
    max_words: int | None = None,
    progress: Progress | None = None,
) -> IngestResult:
    """Read every raw file under `paths`; broken files are reported in sources and skipped.

    Args:
        cache_dir: where parses of file versions are kept; unchanged files are read from
            it. Without one, accepted records are spilled to a temporary folder that lives
            as long as the result.
        max_words: abstracts longer than this are rejected (too_long); None: no limit.
        progress: called with (path, bytes read, file size) as reading goes on.
    """
    roots = [Path(p) for p in paths]
    found = discover(roots)
    overrides = Overrides(roots)
    cache = ParseCache(cache_dir, min_words, max_words) if cache_dir else None
    workdir = None if cache else tempfile.TemporaryDirectory(prefix="paperlake-ingest-")
    files: list[SourceFile] = []
    records: list[tuple[Path, str]] = []  # (Parquet part, source path)
    rejected: list[pl.DataFrame] = []
    settings_seen: dict[Path, Path] = {}
    for number, path in enumerate(found):
        if path.name == SETTINGS_FILE:
            settings_seen.setdefault(path.resolve(), path)
            continue
        if DOCUMENTATION_RE.match(path.name) and path not in roots:
            sha, size = file_digest(path)
            files.append(
                SourceFile(
                    str(path),
                    sha,
                    size,
                    format="documentation",
                    warning=("documentation, not data: not read (name it with --raw to read it)"),
                )
            )
            continue
        override, settings = overrides.for_file(path)
        if settings is not None:
            settings_seen.setdefault(settings.resolve(), settings)
        folder, relative = raw_place(path, roots)
        parts = [folder.resolve().name, *relative.split("/")]
        sha, size = file_digest(path)
        hit = cache.load(SourceFile(str(path), sha, size), override, parts) if cache else None
        if hit:
            source, names, bad = hit
            source.cached = True
            records.extend((p, str(path)) for p in names)
            rejected.append(bad)
            if progress:
                progress(str(path), size, size)
        else:
            writer = (
                cache.writer(sha, override, parts)
                if cache
                else PartWriter(Path(workdir.name) / f"{number:06d}")
            )
            source, bad = ingest_file(
                path, min_words, sha, size, writer, override, max_words, progress, parts
            )
            if cache and source.error is None:
                rejects = _concat(bad, REJECT_SCHEMA)
                stored = cache.store(source, writer, rejects, override, parts)
            else:
                stored = [writer.folder / n for n in writer.names]
            records.extend((p, str(path)) for p in stored)
            rejected.extend(bad)
        # Said after caching, since files of equal content share a parse: what the file's
        # name and place mean for it.
        fmt = (source.format or "").removesuffix(".gz")
        mismatch = None if override.format or not fmt else name_mismatch(fmt, path.name)
        advice = metadata_warning(source, folder, relative)
        source.warning = "; ".join(filter(None, (mismatch, source.warning, advice))) or None
        files.append(source)
    for key, settings in settings_seen.items():
        overrides.rules(settings)
        sha, size = file_digest(settings)
        files.append(
            SourceFile(str(settings), sha, size, format="settings", error=overrides.errors.get(key))
        )
    sources = pl.DataFrame([f.row() for f in files], schema=SOURCE_SCHEMA)
    return IngestResult(
        sources=sources,
        rejects=_concat(rejected, REJECT_SCHEMA),
        files=files,
        parts=records,
        schema=accepted_schema(min_words),
        workdir=workdir,
    )


def accepted_schema(min_words: int) -> dict:
    """Columns and types of accepted records (those of an empty parse)."""
    return dict(normalise(pl.DataFrame(schema=RECORD_SCHEMA), min_words)[0].schema)


def _concat(frames: list[pl.DataFrame], schema: dict) -> pl.DataFrame:
    frames = [f for f in frames if f.height]
    return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame(schema=schema)


def build_papers(records: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One paper per paper_id (its first location) and every location of every paper.

    Returns:
        papers, paper_sources (paper_id with each source path, line and byte offset).
    """
    ordered = records.with_row_index("seen_order")
    locations = ordered.select(
        "paper_id", "source_path", "source_sha256", "record_no", "line", "byte_offset"
    )
    counts = locations.group_by("paper_id").agg(n_locations=pl.len().cast(pl.Int32))
    papers = (
        ordered.sort("seen_order")
        .unique("paper_id", keep="first", maintain_order=True)
        .join(counts, on="paper_id")
        .select(
            "paper_id",
            "source_path",
            "source_sha256",
            "record_no",
            "line",
            "byte_offset",
            "n_locations",
            "venue",
            "year",
            "external_id",
            "title",
            "authors",
            "keywords",
            "categories",
            "decision",
            "abstract",
            "abstract_raw",
            "word_count",
            "links",
            "unresolved_macros",
            "flags",
            "control_chars_removed",
        )
        .sort("paper_id")
    )
    return papers, locations.sort("paper_id", "source_path", "record_no")


def file_report(sources: pl.DataFrame) -> pl.DataFrame:
    """Per file: format, records seen, accepted, rejected (by rule), flags, error, warning."""

    def counts(text: str | None) -> str:
        spec = json.loads(text) if text else {}
        return ", ".join(f"{k}: {v}" for k, v in spec.items())

    return sources.select(
        "path",
        "format",
        seen="records_seen",
        accepted="accepted",
        rejected="rejected",
        rejected_by_rule=pl.col("rejected_by_rule").map_elements(counts, return_dtype=pl.String),
        flags=pl.col("flag_counts").map_elements(counts, return_dtype=pl.String),
        error="error",
        warning="warning",
    )


@contextmanager
def reading_progress(show: bool = True) -> Iterator[Progress]:
    """A transient progress bar of bytes read per file, as a callback for ingest()."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn
    from rich.progress import Progress as Bar

    with Bar(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not show,
    ) as bar:
        task = bar.add_task("reading", total=None)

        def advance(path: str, done: int, total: int) -> None:
            bar.update(task, description=Path(path).name, completed=done, total=total)

        yield advance
