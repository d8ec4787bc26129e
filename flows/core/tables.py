"""Every table a run publishes, declared once: name, description, grain, key, the tables it
reads, the tables its ids refer to, and a description of each column.

Tables built in Python are declared here; a table built in SQL is declared by the header of
its file, sql/<name>.sql (see `parse_header`), so that adding one is its SQL file, its suite
(expectations/<name>.json) and its test. The build order of the SQL tables follows from what
each declares it reads. Derive builds the tables in that order, publish merges each by its
key (history tables are appended to), validate checks each with its suite and checks every
declared reference, and `paperlake tables` and the data-quality page describe them.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from pathlib import Path

from flows.core.settings import EXPECTATIONS_DIR, SQL_DIR


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    keys: tuple[str, ...]  # what identifies a row; empty for history tables
    built_by: str  # ingest | embed | derive | sql | validate | run
    columns: tuple[tuple[str, str], ...]  # (column, what it holds), in table order
    history: bool = False  # one row per run (or per run and check), appended to
    grain: str = ""  # what one row is
    reads: tuple[str, ...] = ()  # tables (published or scratch) its SQL reads
    references: tuple[tuple[str, str], ...] = field(default=())  # (column, table whose key)
    names_rows_by: tuple[str, ...] = ()  # for a history table: what names a row in checks

    @property
    def row_names(self) -> tuple[str, ...]:
        """The columns that name a row to a person: its key, or what a history row is."""
        return self.keys or self.names_rows_by

    @property
    def sql(self) -> Path | None:
        """sql/<name>.sql, for the tables built in SQL."""
        return SQL_DIR / f"{self.name}.sql" if self.built_by == "sql" else None

    @property
    def suite(self) -> Path | None:
        """expectations/<name>.json, where the table has a suite."""
        path = EXPECTATIONS_DIR / f"{self.name}.json"
        return path if path.exists() else None


class HeaderError(ValueError):
    """A sql/<table>.sql header that does not declare its table as `parse_header` reads it."""


FIELD = re.compile(r"^-- (grain|key|reads|references|columns):\s*(.*)$")
COLUMN = re.compile(r"^--   (\w+): (.+)$")


def parse_header(path: Path) -> Table:
    """The table that sql/<name>.sql declares in its leading comment:

    -- <name>: <description>
    -- grain: <what one row is>
    -- key: <column>, <column>
    -- reads: <table>, <table>
    -- references: <column> -> <table>, ...   (optional: the column holds that table's key)
    -- columns:
    --   <column>: <what it holds>
    -- <any further lines: prose>
    """
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("--"):
            break
        lines.append(line)
    name = path.stem
    if not lines or not lines[0].startswith(f"-- {name}: "):
        raise HeaderError(f"{path}: the first line must read '-- {name}: <description>'")
    fields: dict[str, str] = {}
    columns: list[tuple[str, str]] = []
    in_columns = False
    for line in lines[1:]:
        if in_columns and (match := COLUMN.match(line)):
            columns.append((match[1], match[2]))
            continue
        in_columns = False
        if match := FIELD.match(line):
            fields[match[1]] = match[2].strip()
            in_columns = match[1] == "columns"
    missing = [f for f in ("grain", "key", "reads", "columns") if f not in fields]
    if missing or not columns:
        raise HeaderError(f"{path}: the header declares no {', '.join(missing) or 'columns'}")
    return Table(
        name,
        lines[0].split(": ", 1)[1].strip(),
        names(fields["key"]),
        "sql",
        tuple(columns),
        grain=fields["grain"],
        reads=names(fields["reads"]),
        references=tuple(
            tuple(part.strip() for part in ref.split("->"))  # type: ignore[misc]
            for ref in names(fields.get("references", ""))
        ),
    )


def names(text: str) -> tuple[str, ...]:
    """`a, b, c` as ('a', 'b', 'c')."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


LOCATION = (
    ("source_path", "raw file the record was read from"),
    ("source_sha256", "sha256 of that file version"),
    ("record_no", "1-based number of the record in the file"),
    ("line", "1-based line where the record starts (row number in Parquet)"),
    ("byte_offset", "byte offset of the record (in the decompressed stream for .gz)"),
)

DECLARED: tuple[Table, ...] = (
    Table(
        "sources",
        "One row per raw file version read by the run.",
        ("path",),
        "ingest",
        (
            ("path", "the raw file"),
            ("sha256", "content hash"),
            ("bytes", "size"),
            ("format", "format read (blocks, lines, jsonl, csv, ...; .gz appended)"),
            ("venue", "venue for records that carry none (header, settings or path)"),
            ("year", "year for records that carry none"),
            ("records_seen", "records read; = accepted + rejected"),
            ("accepted", "records accepted"),
            ("rejected", "records rejected (see rejects)"),
            ("error", "why the file could not be read at all, if so"),
            ("rejected_by_rule", "JSON: rule -> rejected records"),
            ("flag_counts", "JSON: flag -> accepted records carrying it"),
            ("control_chars_removed", "control and invisible characters removed"),
            ("metadata_from", "where venue and year came from"),
            ("no_venue", "accepted records left without a venue"),
            ("no_year", "accepted records left without a year"),
            ("warning", "what a user should know about the file"),
        ),
        grain="one row per raw file version",
    ),
    Table(
        "papers",
        "One row per distinct paper, as published.",
        ("paper_id",),
        "ingest",
        (
            ("paper_id", "stable id: hash of normalised title and abstract"),
            *LOCATION,
            ("n_locations", "records that gave this paper"),
            ("venue", "venue, NULL where nothing names it"),
            ("year", "year, NULL where nothing names it"),
            ("external_id", "the record's own id (OpenReview, arXiv, PMID, ...)"),
            ("title", "clean title"),
            ("authors", "author names"),
            ("keywords", "keywords"),
            ("categories", "categories (arXiv)"),
            ("decision", "decision (OpenReview)"),
            ("abstract", "clean abstract text"),
            ("abstract_raw", "abstract as read"),
            ("word_count", "words in the abstract"),
            ("links", "links found, each with kind code, review, web or broken"),
            ("unresolved_macros", "TeX macros left in the text"),
            ("flags", "signs of damage (missing_letter:e, all_lowercase, ...)"),
            ("control_chars_removed", "control and invisible characters removed"),
            ("id_field", "the column or key external_id was read from (pmid, PID, id, ...)"),
        ),
        grain="one row per distinct paper (its content id)",
        references=(("source_path", "sources"),),
    ),
    Table(
        "paper_sources",
        "Every location of every paper, duplicates included.",
        ("paper_id", "source_path", "record_no"),
        "ingest",
        (
            ("paper_id", "the paper"),
            *LOCATION,
            ("venue", "the venue this record gives"),
            ("year", "the year this record gives"),
            ("external_id", "the id this record gives"),
            ("title", "the title this record gives"),
        ),
        grain="one row per record that gave a paper",
        references=(
            ("paper_id", "papers"),
            ("source_path", "sources"),
        ),
    ),
    Table(
        "rejects",
        "Every record that was not accepted, with the rule it broke.",
        ("source_path", "record_no"),
        "ingest",
        (
            *LOCATION,
            ("rule", "the rule broken (empty_abstract, too_short, ...)"),
            ("reason", "why, in words, with the exception where there was one"),
            ("raw_snippet", "the record's first characters"),
        ),
        grain="one row per record not accepted",
        references=(("source_path", "sources"),),
    ),
    Table(
        "embeddings",
        "One unit-norm vector per paper from the run's model.",
        ("paper_id", "model"),
        "embed",
        (
            ("paper_id", "the paper"),
            ("model", "model id"),
            ("dim", "vector dimension"),
            ("embedding", "the vector (FLOAT[]; view embedding_vectors casts to FLOAT[dim])"),
        ),
        grain="one row per (paper, model)",
        references=(("paper_id", "papers"),),
    ),
    Table(
        "paper_topics",
        "The topic of every paper.",
        ("paper_id",),
        "derive",
        (
            ("paper_id", "the paper"),
            ("topic_id", "its topic"),
            ("distance", "cosine distance to the topic centroid"),
        ),
        grain="one row per paper",
        references=(
            ("paper_id", "papers"),
            ("topic_id", "topics"),
        ),
    ),
    Table(
        "paper_coordinates",
        "Where every paper lies on the map: a 2-D projection (t-SNE) that keeps near papers near.",
        ("paper_id",),
        "derive",
        (
            ("paper_id", "the paper"),
            ("x", "horizontal place, in [-1, 1]; kept from the last version where it had one"),
            ("y", "vertical place, in [-1, 1]"),
        ),
        grain="one row per paper",
        references=(("paper_id", "papers"),),
    ),
    Table(
        "dq_results",
        "Every expectation's outcome for every published run.",
        (),
        "validate",
        (
            ("run_id", "the run"),
            ("suite", "the table checked"),
            ("expectation", "the Great Expectations expectation"),
            ("column_name", "the column checked"),
            ("kwargs", "its arguments (JSON)"),
            ("severity", "critical (blocks the publish) or warning"),
            ("blocking", "severity = critical"),
            ("success", "passed"),
            ("element_count", "rows checked"),
            ("unexpected_count", "rows that failed"),
            ("unexpected_ids", "keys of the first failing rows"),
            ("observed_value", "what was observed, for table-level checks"),
        ),
        history=True,
        grain="one row per (run, expectation)",
        names_rows_by=("suite", "expectation", "column_name"),
    ),
    Table(
        "runs",
        "One row per run: config, versions, input hashes, counts, seconds per stage.",
        (),
        "run",
        (
            ("run_id", "the run"),
            ("snapshot_id", "the version it published"),
            ("started_at", "start"),
            ("finished_at", "end"),
            ("status", "published"),
            ("fingerprint", "hash of inputs, content config, model and code"),
            ("files", "raw files"),
            (
                "files_parsed",
                "files parsed for records (the rest came from the parse cache, or are "
                "settings, documentation or unreadable files)",
            ),
            ("records_seen", "records read"),
            ("accepted", "accepted"),
            ("rejected", "rejected"),
            ("papers", "papers published"),
            ("embedded", "embeddings computed"),
            ("embeddings_reused", "embeddings taken from the cache"),
            ("topics", "topics"),
            ("dq_outcome", "passed, or passed with warnings"),
            ("model_id", "embedding model"),
            ("model_weights_sha256", "hash of its weights"),
            ("precision", "fp32, bf16 or fp16, or the export that ran (openvino-fp32, ...)"),
            (
                "agreement_with_fp32",
                "JSON: cosine to fp32 torch: of 8 texts of the run below"
                " fp32; of the export's check for an fp32 export; null for fp32 torch",
            ),
            ("config", "JSON: the run's settings"),
            ("packages", "JSON: package versions"),
            ("input_hashes", "JSON: raw file -> sha256"),
            ("stage_seconds", "JSON: stage -> seconds"),
        ),
        history=True,
        grain="one row per published run",
        names_rows_by=("run_id",),
    ),
)


def build_order(sql: list[Table]) -> list[Table]:
    """The SQL tables in an order where each comes after the tables it reads (ties by name)."""
    by_name = {t.name: t for t in sql}
    graph = {t.name: {r for r in t.reads if r in by_name} for t in sql}
    sorter = TopologicalSorter(graph)
    sorter.prepare()
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        order += ready
        sorter.done(*ready)
    return [by_name[name] for name in order]


@functools.cache
def registry() -> tuple[Table, ...]:
    """Every table: those built in Python, then the SQL ones in build order, then history."""
    sql = build_order([parse_header(path) for path in sorted(SQL_DIR.glob("*.sql"))])
    current = [t for t in DECLARED if not t.history]
    return (*current, *sql, *(t for t in DECLARED if t.history))


def table(name: str) -> Table:
    return {t.name: t for t in registry()}[name]


def described() -> dict[str, str]:
    """Each table's one-line description."""
    return {t.name: t.description for t in registry()}


def sql_tables() -> list[str]:
    """Tables built by sql/<name>.sql, in build order."""
    return [t.name for t in registry() if t.built_by == "sql"]


def derived_tables() -> list[str]:
    """Tables the derive stage hands on: built in Python there or by sql/<name>.sql."""
    return [t.name for t in registry() if t.built_by in ("derive", "sql")]


def keyed_tables() -> dict[str, tuple[str, ...]]:
    """Tables merged by key at publish, with their keys."""
    return {t.name: t.keys for t in registry() if not t.history}


def history_tables() -> list[str]:
    """Tables appended to, a row per run."""
    return [t.name for t in registry() if t.history]


def reads_any(name: str, inputs: set[str]) -> bool:
    """Whether the SQL table `name` reads one of `inputs`, itself or through a table it reads."""
    declared = {t.name: t.reads for t in registry() if t.built_by == "sql"}
    todo, seen = [name], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if inputs.intersection(declared.get(current, ())):
            return True
        todo += [r for r in declared.get(current, ()) if r in declared]
    return False


def references() -> list[tuple[str, str, str, str]]:
    """Every declared reference: (table, column, referenced table, its key column)."""
    found = []
    for t in registry():
        for column, target in t.references:
            (key,) = table(target).keys
            found.append((t.name, column, target, key))
    return found
