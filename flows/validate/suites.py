"""The suites in expectations/, one per table: what each expectation checks and the frame
a suite checks."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from flows.core import tables
from flows.core.held import published_columns
from flows.core.settings import EXPECTATIONS_DIR

# Expectations whose outcome for a row depends on that row alone: a row checked once keeps
# its outcome while its content, the suite and the parameters stay the same.
ROW_LEVEL = frozenset(
    {
        "expect_column_values_to_not_be_null",
        "expect_column_values_to_be_null",
        "expect_column_values_to_be_between",
        "expect_column_values_to_be_in_set",
        "expect_column_values_to_match_regex",
        "expect_column_values_to_not_match_regex",
        "expect_column_value_lengths_to_be_between",
        "expect_column_pair_values_to_be_equal",
        "expect_column_pair_values_a_to_be_greater_than_b",
    }
)
# Expectations over the whole table, computed in DuckDB (sql/dq/duplicate_keys.sql).
TABLE_LEVEL = frozenset(
    {
        "expect_column_values_to_be_unique",
        "expect_compound_columns_to_be_unique",
        "expect_table_row_count_to_equal",
    }
)
# The column that names a row to Great Expectations: the hash of its content.
ROW_HASH = "_row_hash"


@dataclass(frozen=True)
class Suite:
    """A suite file from expectations/; failing rows are named by the table's key."""

    name: str
    id_columns: tuple[str, ...]
    expectations: tuple[dict, ...]
    # Columns the checks read that the table derives: name -> DuckDB expression over a row.
    derived: tuple[tuple[str, str], ...] = ()
    # Columns no check reads, left out of the frame checked (large text).
    left_out: tuple[str, ...] = ()

    @classmethod
    def load(cls, name: str, folder: Path = EXPECTATIONS_DIR) -> Suite:
        path = folder / f"{name}.json"
        spec = json.loads(path.read_text())
        return cls(
            name=spec["name"],
            id_columns=tables.table(spec["name"]).row_names,
            expectations=tuple(spec["expectations"]),
            derived=tuple(spec.get("derived", {}).items()),
            left_out=tuple(spec.get("left_out", ())),
        )

    def row_level(self) -> Suite:
        """The expectations of single rows, the rows named by their hash: what Great
        Expectations runs of this suite."""
        rows = tuple(e for e in self.expectations if e["type"] in ROW_LEVEL)
        return Suite(self.name, (ROW_HASH,), rows, self.derived, self.left_out)


def suite_names(folder: Path = EXPECTATIONS_DIR) -> list[str]:
    """The tables that have a suite: one expectations/<table>.json each."""
    return sorted(p.stem for p in folder.glob("*.json"))


def resolve(kwargs: dict, parameters: dict) -> dict:
    """An expectation's kwargs with each {"$PARAMETER": name} replaced by its value."""
    return {
        key: parameters[value["$PARAMETER"]]
        if isinstance(value, dict) and "$PARAMETER" in value
        else value
        for key, value in kwargs.items()
    }


def column_label(kwargs: dict) -> str | None:
    """The column(s) an expectation checks, as dq_results names them."""
    pair = ",".join(c for c in (kwargs.get("column_A"), kwargs.get("column_B")) if c)
    return kwargs.get("column") or ",".join(kwargs.get("column_list", [])) or pair or None


def prepare(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """The frame a suite checks: the table's scalar columns, less those its suite leaves
    out, plus the columns its suite derives (`derived` in expectations/<table>.json)."""
    suite = Suite.load(table)
    if suite.derived:
        # A version published before a column existed reads as the column all null.
        present = published_columns(frame.columns)  # a text held back is there as its hash
        absent = [c for c, _ in tables.table(table).columns if c not in present]
        frame = frame.with_columns(pl.lit(None).alias(c) for c in absent)
        frame = frame.hstack(derived_columns(frame, suite.derived))
    nested = [name for name, dtype in frame.schema.items() if dtype.is_nested()]
    return frame.drop(*nested, *suite.left_out, strict=False)


def derived_columns(frame: pl.DataFrame, derived: tuple[tuple[str, str], ...]) -> pl.DataFrame:
    """The columns `derived` (name, DuckDB expression) computes over `frame`, in its row
    order: DuckDB is handed only the columns the expressions name, and only the derived
    columns come back (handing it the frame copied every column, a million papers'
    abstracts among them: 2.8 GB)."""
    expressions = " ".join(expr for _, expr in derived)
    named = [c for c in frame.columns if re.search(rf"\b{re.escape(c)}\b", expressions)]
    con = duckdb.connect()
    try:
        con.register("frame", frame.select(named or frame.columns[:1]))  # the rows stay
        exprs = ", ".join(f"{expr} as {name}" for name, expr in derived)
        return con.execute(f"select {exprs} from frame").pl()
    finally:
        con.close()
