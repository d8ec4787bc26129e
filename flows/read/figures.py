"""The report's figures of one published version, gathered with the SQL in sql/report/,
and what changed since the version before it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import polars as pl

from flows.core.lake import (
    WarehouseError,
    define_paper_title,
    open_lake,
    published_versions,
    read_sql,
)
from flows.core.settings import Settings
from flows.publish import diff_versions
from flows.read.paper_map import PaperMap, paper_map, topic_names

TOP_DUPLICATES = 20
TOP_CHANGES = 10  # papers added, removed and changed that "What changed" lists, of each
TOP_MENTIONS = 15
LENGTH_BINS = 16


@dataclass
class Change:
    """What changed from the previous published version to this one."""

    previous: int
    added: int
    removed: int
    changed: int
    groups: list[dict[str, Any]]  # dimension, group, papers_a, papers_b, delta (delta != 0)
    new_duplicates: int
    papers: list[dict[str, Any]]  # change, old_id, new_id, title: TOP_CHANGES of each change


@dataclass
class Figures:
    """Every figure the report shows for one version."""

    version: int
    published_at: str
    summary: str
    totals: dict[str, Any]
    run: dict[str, Any] | None
    topics: list[dict[str, Any]]
    paper_map: PaperMap
    venues: list[dict[str, Any]]
    lengths: list[dict[str, Any]]
    dq_by_severity: list[dict[str, Any]]
    dq_failures: list[dict[str, Any]]
    duplicates: list[dict[str, Any]]
    mentions: list[dict[str, Any]] | None  # None: no mentions table at this version
    change: Change | None = None  # None: the first published version
    previous: int | None = None

    @property
    def dq_passed(self) -> int:
        return sum(r["passed"] for r in self.dq_by_severity)

    @property
    def dq_failed(self) -> int:
        return sum(r["failed"] for r in self.dq_by_severity)


def rows(con: duckdb.DuckDBPyConnection, name: str) -> list[dict[str, Any]]:
    """The rows of sql/report/<name>.sql as dicts."""
    return con.execute(read_sql(f"report/{name}")).pl().to_dicts()


def nice_width(span: float, bins: int) -> int:
    """A round bin width (1, 2, 2.5 or 5 times a power of ten) giving about `bins` bins."""
    raw = max(span / bins, 1.0)
    power = 10 ** math.floor(math.log10(raw))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= raw:
            return max(int(step * power), 1)
    return int(10 * power)


def length_histogram(word_counts: list[int], bins: int = LENGTH_BINS) -> list[dict[str, int]]:
    """Papers per abstract-length bin of a round width; bins are [lo, hi).

    Returns:
        one dict per bin from the shortest to the longest abstract: lo, hi, papers.
    """
    if not word_counts:
        return []
    counts = np.asarray(word_counts)
    width = nice_width(float(counts.max() - counts.min()), bins)
    start = int(counts.min()) // width * width
    stop = (int(counts.max()) // width + 1) * width
    edges = np.arange(start, stop + width, width)
    hist, _ = np.histogram(counts, bins=edges)
    return [
        {"lo": int(lo), "hi": int(hi), "papers": int(n)}
        for lo, hi, n in zip(edges[:-1], edges[1:], hist, strict=True)
    ]


def top_mentions(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]] | None:
    """The most-mentioned names, or None when the version has no mentions table."""
    try:
        return rows(con, "top_mentions")
    except duckdb.CatalogException:
        return None  # versions published before mentions existed


def gather(
    con: duckdb.DuckDBPyConnection, version: int, seed: int = 42, snapshot: dict | None = None
) -> Figures:
    """Every figure of the report from a connection with the version's tables in scope.

    Args:
        con: tables papers, embeddings, topics, paper_topics, venue_stats, duplicates,
            dq_results, runs (and mentions and paper_coordinates when present) in the
            default schema.
        version: the version shown; dq figures come from the run whose snapshot_id it is.
        seed: the seed of the PCA map of a version without paper_coordinates.
        snapshot: the version's catalog entry (time, summary), when known.
    """
    define_paper_title(con)
    con.execute(f"set variable version = {int(version)}")
    con.execute(f"set variable top_n = {TOP_DUPLICATES}")
    duplicates = rows(con, "top_duplicates")
    con.execute(f"set variable top_n = {TOP_MENTIONS}")
    mentions = top_mentions(con)

    topics = rows(con, "topic_sizes")
    for topic in topics:
        topic.update(topic_names(topic["topic_id"], topic["label"]))
    run = rows(con, "run_summary")
    snapshot = snapshot or {}
    return Figures(
        version=version,
        published_at=str(snapshot.get("time", "")),
        summary=str(snapshot.get("summary", "")),
        totals=rows(con, "totals")[0],
        run=run[0] if run else None,
        topics=topics,
        paper_map=paper_map(con, topics, seed),
        venues=rows(con, "venue_years"),
        lengths=length_histogram([r["word_count"] for r in rows(con, "word_counts")]),
        dq_by_severity=rows(con, "dq_by_severity"),
        dq_failures=rows(con, "dq_failures"),
        duplicates=duplicates,
        mentions=mentions,
    )


def change_since(settings: Settings, previous: int, version: int) -> Change:
    """Papers added, removed and changed (TOP_CHANGES of each by name), and group and
    near-duplicate changes."""
    diff = diff_versions(settings, previous, version)
    counts = diff.counts()
    groups = diff.groups.filter(pl.col("delta") != 0).to_dicts()
    return Change(
        previous=previous,
        added=counts["added"],
        removed=counts["removed"],
        changed=counts["changed"],
        groups=groups,
        new_duplicates=diff.new_duplicates.height,
        papers=diff.papers.filter(pl.int_range(pl.len()).over("change") < TOP_CHANGES).to_dicts(),
    )


def build(settings: Settings, version: int | None = None) -> Figures:
    """The figures of a published version (default: the latest) of the warehouse.

    Raises:
        WarehouseError: no warehouse, nothing published, or `version` is not published.
    """
    with open_lake(settings, version, extensions=()) as con:
        published = published_versions(con)
        if not published:
            raise WarehouseError(f"{settings.warehouse} holds no published version yet")
        version = version if version is not None else published[-1]
        snapshots = con.execute(read_sql("catalog/versions")).pl()
        entry = snapshots.filter(pl.col("version") == version).to_dicts()
        figures = gather(con, version, settings.seed, entry[0] if entry else None)
    earlier = [v for v in published if v < version]
    if earlier:
        figures.previous = earlier[-1]
        # diff_versions opens its own connection, so this one is closed first.
        figures.change = change_since(settings, earlier[-1], version)
    return figures
