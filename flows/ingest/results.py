"""What follows from reading: papers and their locations, the per-file report, a progress
bar."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn
from rich.progress import Progress as Bar

from flows.ingest.model import (
    Progress,
)


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
    # Each paper's first record as seen.
    papers = (
        ordered.filter(pl.col("paper_id").is_first_distinct())
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
            "id_field",
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
