"""References between tables: every id a table holds in a declared column is a key of the
table it names (`-- references: neighbor_id -> papers` in sql/neighbors.sql, `references=`
in flows/core/tables.py). Each is a blocking check with a dq_results row of its own."""

from __future__ import annotations

import json

import polars as pl

from flows.core import tables

EXPECTATION = "expect_column_values_to_be_keys_of_table"
SAMPLE_IDS = 20


def check_references(frames: dict[str, pl.DataFrame], run_id: str) -> pl.DataFrame:
    """The dq_results rows of every declared reference between tables among `frames`."""
    rows = [
        reference_row(frames[name], column, frames[target], key, run_id, name, target)
        for name, column, target, key in tables.references()
        if name in frames and target in frames
    ]
    return pl.DataFrame(rows, schema=DQ_COLUMNS)


def reference_row(
    frame: pl.DataFrame,
    column: str,
    target: pl.DataFrame,
    key: str,
    run_id: str,
    name: str,
    target_name: str,
) -> dict:
    """One reference's outcome: the ids of `frame[column]` that are not keys of `target`."""
    held = frame.select(pl.col(column).drop_nulls().unique())
    missing = held.join(target.select(pl.col(key).alias(column)), on=column, how="anti")
    shown = missing.sort(column).head(SAMPLE_IDS)[column].cast(pl.String).to_list()
    return {
        "run_id": run_id,
        "suite": name,
        "expectation": EXPECTATION,
        "column_name": column,
        "kwargs": json.dumps({"column": column, "table": target_name, "key": key}),
        "severity": "critical",
        "blocking": True,
        "success": missing.height == 0,
        "element_count": held.height,
        "unexpected_count": missing.height,
        "unexpected_ids": shown,
        "observed_value": None,
    }


DQ_COLUMNS = {
    "run_id": pl.String,
    "suite": pl.String,
    "expectation": pl.String,
    "column_name": pl.String,
    "kwargs": pl.String,
    "severity": pl.String,
    "blocking": pl.Boolean,
    "success": pl.Boolean,
    "element_count": pl.Int64,
    "unexpected_count": pl.Int64,
    "unexpected_ids": pl.List(pl.String),
    "observed_value": pl.String,
}
