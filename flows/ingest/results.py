"""What follows from reading: papers and their locations, the per-file report, a progress
bar."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import polars as pl

from flows.core.held import HELD_BACK
from flows.core.progress import progress
from flows.ingest.model import Progress


def build_papers(
    records: pl.DataFrame, shown: pl.DataFrame | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One paper per paper_id and every location of every paper, with what each says.

    A paper found in several records shows the metadata (venue, year, ids, title, ...) of
    one of them, by a rule that does not depend on how files sort: the record the last
    version showed it from, while that record still holds it (`shown`: paper_id,
    source_path, record_no); else its first record as read (files in path order, records
    in file order).

    Records whose texts are held back (`IngestResult.held_back_records`) give
    papers that hold their hashes instead.

    Returns:
        papers, paper_sources (each location: path, record, line, byte offset, and the
        venue, year, external id and title that record gives).
    """
    ordered = records.with_row_index("seen_order")
    if shown is not None and shown.height:
        kept = shown.select("paper_id", "source_path", "record_no", _kept=pl.lit(True))
        ordered = ordered.join(kept, on=["paper_id", "source_path", "record_no"], how="left")
        ordered = ordered.sort(pl.col("_kept").is_null(), "seen_order").drop("_kept")
    locations = ordered.select(
        "paper_id", "source_path", "source_sha256", "record_no", "line", "byte_offset",
        "venue", "year", "external_id", "title",
    )  # fmt: skip
    counts = locations.group_by("paper_id").agg(n_locations=pl.len().cast(pl.Int32))
    papers = (
        ordered.filter(pl.col("paper_id").is_first_distinct())
        .join(counts, on="paper_id")
        .select(paper_columns(ordered.columns))
        .sort("paper_id")
    )
    return papers, locations.sort("paper_id", "source_path", "record_no")


PAPER_COLUMNS = (
    "paper_id", "source_path", "source_sha256", "record_no", "line", "byte_offset",
    "n_locations", "venue", "year", "external_id", "title", "authors", "keywords",
    "categories", "decision", "abstract", "abstract_raw", "word_count", "links",
    "unresolved_macros", "flags", "control_chars_removed", "id_field",
)  # fmt: skip


def paper_columns(columns: list[str]) -> list[str]:
    """The columns of papers, with the held-back texts' hashes where `columns` has them."""
    return [HELD_BACK[c] if HELD_BACK.get(c) in columns else c for c in PAPER_COLUMNS]


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
    """The files read so far, shown as reading goes on (flows/core/progress.py), as a
    callback for ingest(): called with (path, bytes read, file size)."""
    with progress("ingest", None, "files read", show=show) as files_done:
        finished: set[str] = set()

        def advance(path: str, done: int, total: int) -> None:
            if done >= total and path not in finished:
                finished.add(path)
                files_done(1)

        yield advance
