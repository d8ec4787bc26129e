"""Every table a run publishes, declared once: name, what builds it, its key, its suite, a
one-line description and a description of each column.

Aggregate builds the SQL tables in the order listed here, publish merges each table by its
key (history tables are appended to), validate reports failing rows by the key, and the
data-quality page and the README describe the tables with these words.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flows.core.settings import EXPECTATIONS_DIR, SQL_DIR


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    keys: tuple[str, ...]  # what identifies a row; empty for history tables
    built_by: str  # ingest | embed | aggregate | sql | validate | run
    columns: tuple[tuple[str, str], ...]  # (column, what it holds), in table order
    history: bool = False  # one row per run (or per run and check), appended to

    @property
    def sql(self) -> Path | None:
        """sql/<name>.sql, for the tables built in SQL."""
        return SQL_DIR / f"{self.name}.sql" if self.built_by == "sql" else None

    @property
    def suite(self) -> Path | None:
        """expectations/<name>.json, where the table has a suite."""
        path = EXPECTATIONS_DIR / f"{self.name}.json"
        return path if path.exists() else None


LOCATION = (
    ("source_path", "raw file the record was read from"),
    ("source_sha256", "sha256 of that file version"),
    ("record_no", "1-based number of the record in the file"),
    ("line", "1-based line where the record starts (row number in Parquet)"),
    ("byte_offset", "byte offset of the record (in the decompressed stream for .gz)"),
)

TABLES: tuple[Table, ...] = (
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
        ),
    ),
    Table(
        "paper_sources",
        "Every location of every paper, duplicates included.",
        ("paper_id", "source_path", "record_no"),
        "ingest",
        (("paper_id", "the paper"), *LOCATION),
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
    ),
    Table(
        "paper_topics",
        "The topic of every paper.",
        ("paper_id",),
        "aggregate",
        (
            ("paper_id", "the paper"),
            ("topic_id", "its topic"),
            ("distance", "cosine distance to the topic centroid"),
        ),
    ),
    Table(
        "paper_coordinates",
        "Where every paper lies on the map: a 2-D projection (t-SNE) that keeps near papers near.",
        ("paper_id",),
        "aggregate",
        (
            ("paper_id", "the paper"),
            ("x", "horizontal place, in [-1, 1]; kept from the last version where it had one"),
            ("y", "vertical place, in [-1, 1]"),
        ),
    ),
    Table(
        "neighbors",
        "Top-k nearest papers of every paper.",
        ("paper_id", "neighbor_id"),
        "sql",
        (
            ("paper_id", "the paper"),
            ("neighbor_id", "a near paper"),
            ("rank", "1 = nearest"),
            ("score", "cosine similarity"),
        ),
    ),
    Table(
        "duplicates",
        "Near-duplicate pairs of distinct papers.",
        ("paper_a", "paper_b"),
        "sql",
        (
            ("paper_a", "the pair's smaller id"),
            ("paper_b", "the pair's larger id"),
            ("score", "cosine similarity, at or above the threshold"),
            ("kind", "identical (score >= 0.999) or near"),
            ("source_a", "file of paper_a"),
            ("line_a", "line of paper_a"),
            ("source_b", "file of paper_b"),
            ("line_b", "line of paper_b"),
        ),
    ),
    Table(
        "duplicate_groups",
        "Groups of papers that are near-duplicates of one another (connected pairs).",
        ("paper_id",),
        "sql",
        (
            ("group_id", "the group: its smallest paper_id"),
            ("paper_id", "a paper in the group"),
            ("group_size", "papers in the group (2 or more)"),
            ("title", "the paper's title"),
            ("source_path", "file of the paper"),
            ("line", "line of the paper"),
        ),
    ),
    Table(
        "topic_terms",
        "The most distinctive terms of every topic (class-based TF-IDF).",
        ("topic_id", "term"),
        "sql",
        (
            ("topic_id", "the topic"),
            ("term", "a term"),
            ("docs", "papers of the topic using it"),
            ("df", "papers using it overall"),
            ("weight", "c-TF-IDF weight"),
            ("term_rank", "1 = most distinctive"),
        ),
    ),
    Table(
        "topics",
        "One row per topic with a readable label.",
        ("topic_id",),
        "sql",
        (
            ("topic_id", "id, kept across versions where the topic persists"),
            ("label", "its three most distinctive terms"),
            ("papers", "papers in it"),
            ("mean_distance", "mean cosine distance of its papers to the centroid"),
            ("top_terms", "its terms by rank"),
            ("centroid", "mean vector"),
        ),
    ),
    Table(
        "topic_stats",
        "Papers per topic, venue and year.",
        ("topic_id", "venue", "year"),
        "sql",
        (
            ("topic_id", "the topic"),
            ("label", "its label"),
            ("venue", "venue"),
            ("year", "year"),
            ("papers", "papers"),
        ),
    ),
    Table(
        "mentions",
        "Benchmarks, datasets, metrics and links named by each paper.",
        ("paper_id", "kind", "name"),
        "sql",
        (
            ("paper_id", "the paper"),
            ("kind", "benchmark, dataset, metric, code or review"),
            ("name", "what is named (or the link)"),
            ("value", "a number reported with it, if any"),
            ("context", "the words around it"),
        ),
    ),
    Table(
        "venue_stats",
        "Per venue and year: papers, words, code and topics.",
        ("venue", "year"),
        "sql",
        (
            ("venue", "venue"),
            ("year", "year"),
            ("papers", "papers"),
            ("mean_words", "mean abstract words"),
            ("min_words", "fewest"),
            ("max_words", "most"),
            ("papers_with_code", "papers with a code link"),
            ("topics", "topics they fall in"),
        ),
    ),
    Table(
        "source_stats",
        "Per raw file: records, papers and duplicates.",
        ("source_path",),
        "sql",
        (
            ("source_path", "the raw file"),
            ("format", "format read"),
            ("venue", "its venue"),
            ("year", "its year"),
            ("records_seen", "records read"),
            ("accepted", "accepted"),
            ("rejected", "rejected"),
            ("papers", "distinct papers first seen in it"),
            ("duplicate_records", "records whose paper came first elsewhere"),
            ("error", "why it could not be read, if so"),
        ),
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
    ),
)
BY_NAME = {table.name: table for table in TABLES}


def table(name: str) -> Table:
    return BY_NAME[name]


def sql_tables() -> list[str]:
    """Tables built by sql/<name>.sql, in dependency order."""
    return [t.name for t in TABLES if t.built_by == "sql"]


def aggregate_tables() -> list[str]:
    """Tables the aggregate stage hands on: built in Python or by sql/<name>.sql, in order."""
    return [t.name for t in TABLES if t.built_by in ("aggregate", "sql")]


def keyed_tables() -> dict[str, tuple[str, ...]]:
    """Tables merged by key at publish, with their keys."""
    return {t.name: t.keys for t in TABLES if not t.history}


def history_tables() -> list[str]:
    """Tables appended to, a row per run."""
    return [t.name for t in TABLES if t.history]
