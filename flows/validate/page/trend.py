"""The data-quality trend: each suite's outcome and values over the latest versions."""

from __future__ import annotations

import json
from typing import Any

import duckdb
import polars as pl

from flows.core.lake import published_versions, read_sql
from flows.validate.page.page import (
    THIS_RUN,
    SuiteTrend,
    TrendPoint,
    expectation_key,
    number,
    status_of,
    threshold,
)

TREND_VERSIONS = 8  # versions the trend shows, the page's own last


def trend_point(version: int | None, rows: list[dict[str, Any]]) -> TrendPoint:
    """A suite in one version: its outcome and the rows its expectations found wanting."""
    blocking = sum(1 for r in rows if not r["success"] and r["blocking"])
    warning = sum(1 for r in rows if not r["success"] and not r["blocking"])
    return TrendPoint(
        label=f"v{version}" if version is not None else THIS_RUN,
        version=version,
        status=status_of(blocking, warning),
        failed_blocking=blocking,
        failed_warning=warning,
        unexpected_rows=sum(r["unexpected_count"] or 0 for r in rows),
    )


def value_rows(rows: list[dict[str, Any]], points: list[TrendPoint]) -> list[dict[str, Any]]:
    """One row per expectation: its observed value or unexpected rows in each version."""
    grid: dict[str, dict[str, Any]] = {}
    for r in rows:  # oldest first: the latest version's thresholds label the row
        entry = grid.setdefault(
            expectation_key(r["expectation"], r["column_name"], r["kwargs"]), {"cells": {}}
        )
        kwargs = json.loads(r["kwargs"]) if r["kwargs"] else {}
        expected = threshold(r["expectation"], kwargs, r["suite"])
        entry["label"] = f"{r['column_name'] or 'table'}: {expected}"
        entry["severity"] = r["severity"]
        value = json.loads(r["observed_value"]) if r["observed_value"] else None
        if value is not None:
            text = number(value)
        else:
            text = "—" if r["unexpected_count"] is None else str(r["unexpected_count"])
        entry["cells"][r["version"]] = {"text": text, "success": bool(r["success"])}
    return [
        {
            "label": e["label"],
            "severity": e["severity"],
            "cells": [e["cells"].get(p.version) for p in points],
        }
        for e in sorted(grid.values(), key=lambda e: e["label"])
    ]


def trend_of(history: pl.DataFrame) -> list[SuiteTrend]:
    """Per suite: outcome and unexpected rows per version, and each expectation's values.

    Args:
        history: dq_results rows with a `version` column (null for a run that did not
            publish), oldest version first.
    """
    if history.height == 0:
        return []
    versions = list(dict.fromkeys(history["version"].to_list()))
    out = []
    for suite in sorted(set(history["suite"].to_list())):
        rows = history.filter(pl.col("suite") == suite).to_dicts()
        points = [
            trend_point(v, here)
            for v in versions
            if (here := [r for r in rows if r["version"] == v])
        ]
        out.append(SuiteTrend(suite, points, value_rows(rows, points)))
    return out


def history_rows(con: duckdb.DuckDBPyConnection, version: int) -> pl.DataFrame:
    """The trend's rows: the last TREND_VERSIONS published runs up to `version`."""
    con.execute(f"set variable version = {int(version)}")
    con.execute(f"set variable trend_versions = {TREND_VERSIONS}")
    return con.execute(read_sql("dq/history")).pl()


def latest_trend(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The trend's rows (`history_rows`) up to the latest version of the catalog attached on
    `con`; none where nothing is published."""
    versions = published_versions(con)
    if not versions:
        return pl.DataFrame()
    try:
        return history_rows(con, versions[-1])
    except duckdb.CatalogException:  # no runs or dq_results table
        return pl.DataFrame()


def with_run(history: pl.DataFrame, results: pl.DataFrame, version: int | None) -> pl.DataFrame:
    """The trend's rows of the versions before a run (`latest_trend`), the oldest dropped to
    make room, then the run's `results` as version `version` (None: not published)."""
    current = results.select(pl.lit(version, dtype=pl.Int64).alias("version"), pl.all())
    if not history.height:
        return current
    kept = sorted(set(history["version"].to_list()))[-(TREND_VERSIONS - 1) :]
    earlier = history.filter(pl.col("version").is_in(kept))
    return pl.concat([earlier, current.select(history.columns)], how="vertical_relaxed")
