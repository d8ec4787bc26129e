"""dq_results rows: a row-level expectation's result from each row's outcome, and the
table-level expectations (uniqueness, row counts) computed in DuckDB over the whole table."""

from __future__ import annotations

import json
from functools import lru_cache

import duckdb
import numpy as np
import polars as pl

from flows.core.held import column_or_stand_in
from flows.core.lake import read_sql
from flows.validate.suites import Suite, column_label, resolve

SAMPLE_IDS = 20  # failing rows a result names; the counts cover every row
DQ_SCHEMA = {
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


def row_ids(rows: pl.DataFrame, id_columns: tuple[str, ...]) -> list[str]:
    """The keys of the first SAMPLE_IDS rows, sorted, as dq_results lists failing rows."""
    keys = rows.head(SAMPLE_IDS).select(
        pl.concat_str([pl.col(c).cast(pl.String) for c in id_columns], separator="/")
    )
    return sorted(dict.fromkeys(keys.to_series().drop_nulls().to_list()))


@lru_cache(maxsize=1)
def scratch_database() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB kept for the process: each table-level check runs on a cursor
    of it (its own connection, cheaper than a new database)."""
    return duckdb.connect(config={"threads": 1})


def failed_lists(hashes: pl.Series, failures: list[set[int]]) -> pl.DataFrame:
    """row_hash and failed (the indices of the expectations whose failing rows hold that
    hash, ascending) for each of `hashes`: built from the few failures, not row by row."""
    schema = {"row_hash": pl.UInt64, "failed": pl.List(pl.UInt16)}
    pairs = pl.DataFrame(
        [(h, i) for i, bad in enumerate(failures) for h in bad],
        schema={"row_hash": pl.UInt64, "index": pl.UInt16},
        orient="row",
    )
    lists = pairs.group_by("row_hash").agg(pl.col("index").unique().sort().alias("failed"))
    found = pl.DataFrame({"row_hash": hashes}, schema={"row_hash": pl.UInt64}).join(
        lists, on="row_hash", how="left", maintain_order="left"
    )
    empty = pl.lit([], dtype=pl.List(pl.UInt16))
    return found.with_columns(pl.col("failed").fill_null(empty)).cast(schema)


def duplicate_rows(frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """Rows of `frame` whose values in `columns` (not all missing) occur more than once,
    in table order (sql/dq/duplicate_keys.sql, in DuckDB)."""
    keys = frame.select(columns).with_row_index("row_number")
    present = keys.filter(pl.any_horizontal(pl.col(columns).is_not_null()))
    # Keys whose hashes all differ differ, and hashing is much cheaper than DuckDB's count
    # of each key: only a repeated hash needs the count.
    if present.select(pl.struct(columns).hash()).to_series().n_unique() == present.height:
        return frame.clear()
    con = scratch_database().cursor()
    try:
        con.register("checked", present.to_arrow())
        names = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
        sql = read_sql("dq/duplicate_keys").replace("__columns__", names)
        numbers = [r[0] for r in con.execute(sql).fetchall()]
    finally:
        con.close()
    return frame[numbers]


def row_result(
    run_id: str,
    suite: Suite,
    field: dict,
    failing: np.ndarray,
    prepared: pl.DataFrame,
) -> dict:
    """One row-level expectation's dq_results row over every row of `prepared` (whose
    held-back texts' hashes are missing where the texts are: flows/core/held.py).

    Args:
        field: the expectation's result fields that do not depend on the rows.
        failing: whether each row of `prepared` fails the expectation.
    """
    mask = pl.Series(failing)
    unexpected = int(mask.sum())
    column = field["column"]
    if field["expectation"] == "expect_column_values_to_not_be_null" or column is None:
        considered = prepared.height
    else:  # as Great Expectations: null values are not counted against `mostly`
        considered = prepared.height - column_or_stand_in(prepared, column).null_count()
    mostly = field["mostly"]
    if mostly is None:
        success = unexpected == 0
    else:
        success = considered == 0 or (considered - unexpected) / considered >= mostly
    return {
        "run_id": run_id,
        "suite": suite.name,
        **{k: field[k] for k in ("expectation", "column_name", "kwargs", "severity")},
        "blocking": field["severity"] == "critical",
        "success": success,
        "element_count": prepared.height,
        "unexpected_count": unexpected,
        "unexpected_ids": row_ids(prepared.filter(mask), suite.id_columns),
        "observed_value": None,
    }


def table_result(
    run_id: str, suite: Suite, expectation: dict, prepared: pl.DataFrame, parameters: dict
) -> dict:
    """A table-level expectation's dq_results row, computed in DuckDB over the whole table."""
    kwargs = resolve(expectation["kwargs"], parameters)
    severity = expectation.get("severity", "critical")
    row = {
        "run_id": run_id,
        "suite": suite.name,
        "expectation": expectation["type"],
        "column_name": column_label(kwargs),
        "kwargs": json.dumps(kwargs, sort_keys=True, default=str),
        "severity": severity,
        "blocking": severity == "critical",
    }
    if expectation["type"] == "expect_table_row_count_to_equal":
        return row | {
            "success": prepared.height == kwargs["value"],
            "element_count": None,
            "unexpected_count": None,
            "unexpected_ids": [],
            "observed_value": json.dumps(prepared.height),
        }
    columns = kwargs.get("column_list") or [kwargs["column"]]
    duplicated = duplicate_rows(prepared, columns)
    return row | {
        "success": duplicated.height == 0,
        "element_count": prepared.height,
        "unexpected_count": duplicated.height,
        "unexpected_ids": row_ids(duplicated, suite.id_columns),
        "observed_value": None,
    }
