"""Ingest: raw files into records, each either accepted (a paper location) or rejected.

Reading streams each file line by line; cleaning runs as polars expressions over batches.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import polars as pl

# Bump when parsing or cleaning changes, so that cached parses of unchanged files are redone.
INGEST_VERSION = "1"
BATCH_RECORDS = 50_000
SNIPPET_CHARS = 200
SNIFF_BYTES = 8192

HEADER_RE = re.compile(
    r"^\s*(?P<venue>[A-Za-z][\w&.+\- ]*?)\s+(?P<year>(?:19|20)\d{2})"
    r"(?:\s+(?:papers|abstracts|submissions|accepted papers))?\s*:?\s*$",
    re.IGNORECASE,
)
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
    "decision": pl.String,
    "abstract_raw": pl.String,
    "decode_error": pl.String,
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
LINK_DTYPE = pl.List(pl.Struct({"url": pl.String, "kind": pl.String}))


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


@dataclass
class IngestResult:
    """What ingest hands on: the files seen, accepted records and rejects."""

    sources: pl.DataFrame
    records: pl.DataFrame
    rejects: pl.DataFrame
    files: list[SourceFile] = field(default_factory=list)


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
    match = HEADER_RE.match(line)
    if not match or len(line) > 120:
        return None
    return match.group("venue").strip(), int(match.group("year"))


def detect_format(head: bytes) -> str:
    """The format of a text file from its first bytes.

    Returns:
        `blocks` (abstracts separated by blank lines, optional header line) or
        `lines` (one abstract per line).

    Raises:
        IngestError: the content is empty or binary.
    """
    if not head.strip():
        raise IngestError("file is empty")
    if b"\x00" in head:
        raise IngestError("binary content (NUL bytes), not text")
    lines = head.decode("utf-8", errors="replace").splitlines()
    body = lines[1:-1] if parse_header(lines[0]) else lines[:-1]
    return "blocks" if any(not line.strip() for line in body) else "lines"


def read_records(path: Path, fmt: str, source: SourceFile) -> Iterator[pl.DataFrame]:
    """Raw records of a text file in batches, with 1-based line and byte offset of each."""
    rows: list[dict] = []
    block: list[bytes] = []
    block_line = block_offset = 0
    offset = 0
    record_no = 0

    def flush() -> None:
        nonlocal record_no, block
        if not block:
            return
        record_no += 1
        raw = b"".join(block)
        try:
            text, error = raw.decode("utf-8"), None
        except UnicodeDecodeError as exc:
            text = raw.decode("utf-8", errors="replace")
            error = f"invalid UTF-8 at byte {block_offset + exc.start}"
        rows.append(
            {
                "record_no": record_no,
                "line": block_line,
                "byte_offset": block_offset,
                "abstract_raw": text,
                "decode_error": error,
            }
        )
        block = []

    with path.open("rb") as handle:
        for line_no, line in enumerate(handle, start=1):
            start = offset
            offset += len(line)
            if line_no == 1 and source.venue is not None:
                continue  # the header line
            if fmt == "lines" or not line.strip(b"\r\n"):
                flush()
                if fmt == "blocks":
                    continue
            if not block:
                block_line, block_offset = line_no, start
            block.append(line)
            if fmt == "lines":
                flush()
            if len(rows) >= BATCH_RECORDS:
                yield _records_frame(rows, source)
                rows = []
        flush()
    if rows:
        yield _records_frame(rows, source)


def _records_frame(rows: list[dict], source: SourceFile) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema_overrides={"decode_error": pl.String})
    return frame.with_columns(
        source_path=pl.lit(source.path),
        source_sha256=pl.lit(source.sha256),
        venue=pl.lit(source.venue, dtype=pl.String),
        year=pl.lit(source.year, dtype=pl.Int32),
        external_id=pl.lit(None, dtype=pl.String),
        title_raw=pl.lit(None, dtype=pl.String),
        authors=pl.lit([], dtype=pl.List(pl.String)),
        keywords=pl.lit([], dtype=pl.List(pl.String)),
        decision=pl.lit(None, dtype=pl.String),
    ).select(list(RECORD_SCHEMA))


def clean_text(column: str) -> pl.Expr:
    """Plain readable text from LaTeX/markdown-flavoured raw text (NFC, whitespace collapsed)."""
    expr = pl.col(column).fill_null("")
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
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
        .str.normalize("NFC")
    )
    return expr


def classify_link(url: str) -> str:
    """code | review | web | broken, by the link's host."""
    host = (urlparse(url).hostname or "").lower()
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


def normalise(records: pl.DataFrame, min_words: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Clean raw records and split them into accepted and rejected.

    Returns:
        accepted records with paper_id, title, abstract, word_count, links and
        unresolved_macros; rejects with the rule each record broke.
    """
    cleaned = records.with_columns(
        title=pl.when(pl.col("title_raw").is_not_null()).then(clean_text("title_raw")),
        abstract=clean_text("abstract_raw"),
    ).with_columns(
        word_count=pl.col("abstract").str.count_matches(r"\S+").cast(pl.Int32),
        links=pl.col("abstract").map_elements(extract_links, return_dtype=LINK_DTYPE),
        unresolved_macros=pl.col("abstract")
        .str.extract_all(r"\\[A-Za-z]+")
        .list.unique(maintain_order=True),
    )
    rule = (
        pl.when(pl.col("decode_error").is_not_null())
        .then(pl.lit("invalid_utf8"))
        .when(pl.col("abstract") == "")
        .then(pl.lit("empty_abstract"))
        .when(pl.col("word_count") < min_words)
        .then(pl.lit("too_short"))
    )
    reason = (
        pl.when(pl.col("decode_error").is_not_null())
        .then(pl.col("decode_error"))
        .when(pl.col("abstract") == "")
        .then(pl.lit("abstract is empty or whitespace only"))
        .when(pl.col("word_count") < min_words)
        .then(
            pl.format(
                "abstract has {} words, fewer than the minimum of {}",
                pl.col("word_count"),
                pl.lit(min_words),
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
        raw_snippet=pl.col("abstract_raw").str.slice(0, SNIPPET_CHARS),
    )
    accepted = cleaned.filter(pl.col("rule").is_null()).drop("rule", "reason", "decode_error")
    accepted = accepted.with_columns(
        paper_id=pl.struct("title", "abstract").map_elements(
            lambda r: content_id(r["title"], r["abstract"]), return_dtype=pl.String
        )
    )
    return accepted, rejects


def ingest_file(
    path: Path, min_words: int, sha: str, size: int
) -> tuple[SourceFile, list[pl.DataFrame], list[pl.DataFrame]]:
    """Parse one raw file. A file that cannot be read at all comes back with its error set."""
    source = SourceFile(path=str(path), sha256=sha, bytes=size)
    accepted: list[pl.DataFrame] = []
    rejected: list[pl.DataFrame] = []
    try:
        with path.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
        source.format = detect_format(head)
        first_line = head.split(b"\n", 1)[0].decode("utf-8", errors="replace")
        if header := parse_header(first_line):
            source.venue, source.year = header
        for batch in read_records(path, source.format, source):
            ok, bad = normalise(batch, min_words)
            accepted.append(ok)
            rejected.append(bad)
            source.records_seen += batch.height
            source.accepted += ok.height
            source.rejected += bad.height
    except (IngestError, OSError) as exc:
        source.error = f"{path}: {exc}"
        source.records_seen = source.accepted = source.rejected = 0
        return source, [], []
    return source, accepted, rejected


class ParseCache:
    """Parsed records of file versions already seen, keyed by content hash and ingest config.

    A file whose bytes did not change is not parsed again; its records are read back and
    given the file's current path.
    """

    def __init__(self, folder: Path, min_words: int):
        self.folder = folder
        self.config = f"{INGEST_VERSION}:{min_words}"

    def _stem(self, sha256: str) -> Path:
        key = hashlib.sha256(f"{sha256}:{self.config}".encode()).hexdigest()[:32]
        return self.folder / key

    def load(self, source: SourceFile) -> tuple[SourceFile, pl.DataFrame, pl.DataFrame] | None:
        stem = self._stem(source.sha256)
        meta = stem.with_suffix(".json")
        if not meta.exists():
            return None
        cached = SourceFile(**json.loads(meta.read_text()))
        cached.path = source.path
        relabel = {"source_path": pl.lit(source.path)}
        records = pl.read_parquet(stem.with_suffix(".records.parquet")).with_columns(**relabel)
        rejects = pl.read_parquet(stem.with_suffix(".rejects.parquet")).with_columns(**relabel)
        return cached, records, rejects

    def store(self, source: SourceFile, records: pl.DataFrame, rejects: pl.DataFrame) -> None:
        """Write the three files of a parse, each atomically, the index file last."""
        self.folder.mkdir(parents=True, exist_ok=True)
        stem = self._stem(source.sha256)
        for suffix, frame in ((".records.parquet", records), (".rejects.parquet", rejects)):
            tmp = stem.with_suffix(suffix + ".tmp")
            frame.write_parquet(tmp)
            os.replace(tmp, stem.with_suffix(suffix))
        tmp = stem.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(vars(source)))
        os.replace(tmp, stem.with_suffix(".json"))


def ingest(
    paths: Iterable[Path], min_words: int = 20, cache_dir: Path | None = None
) -> IngestResult:
    """Read every raw file under `paths`; broken files are reported in sources and skipped.

    Args:
        cache_dir: where parses of file versions are kept; unchanged files are read from it.
    """
    cache = ParseCache(cache_dir, min_words) if cache_dir else None
    files: list[SourceFile] = []
    accepted: list[pl.DataFrame] = []
    rejected: list[pl.DataFrame] = []
    for path in discover(paths):
        sha, size = file_digest(path)
        hit = cache.load(SourceFile(str(path), sha, size)) if cache else None
        if hit:
            source, ok, bad = hit[0], [hit[1]], [hit[2]]
            source.cached = True
        else:
            source, ok, bad = ingest_file(path, min_words, sha, size)
            if cache and source.error is None:
                cache.store(
                    source, _concat(ok, accepted_schema(min_words)), _concat(bad, REJECT_SCHEMA)
                )
        files.append(source)
        accepted.extend(ok)
        rejected.extend(bad)
    records = _concat(accepted, accepted_schema(min_words))
    rejects = _concat(rejected, REJECT_SCHEMA)
    sources = pl.DataFrame(
        [{k: v for k, v in vars(f).items() if k != "cached"} for f in files],
        schema={
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
        },
    )
    return IngestResult(sources=sources, records=records, rejects=rejects, files=files)


def accepted_schema(min_words: int) -> dict:
    """Columns and types of accepted records (those of an empty parse)."""
    return dict(normalise(pl.DataFrame(schema=RECORD_SCHEMA), min_words)[0].schema)


def _concat(frames: list[pl.DataFrame], schema: dict) -> pl.DataFrame:
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
            "decision",
            "abstract",
            "abstract_raw",
            "word_count",
            "links",
            "unresolved_macros",
        )
        .sort("paper_id")
    )
    return papers, locations.sort("paper_id", "source_path", "record_no")
