"""The suites in expectations/, one per table: what each expectation checks and the frame
a suite checks."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from flows.core import tables
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

    @classmethod
    def load(cls, name: str, folder: Path = EXPECTATIONS_DIR) -> Suite:
        path = folder / f"{name}.json"
        spec = json.loads(path.read_text())
        return cls(
            name=spec["name"],
            id_columns=tables.table(spec["name"]).keys,
            expectations=tuple(spec["expectations"]),
        )

    def row_level(self) -> Suite:
        """The expectations of single rows, the rows named by their hash: what Great
        Expectations runs of this suite."""
        rows = tuple(e for e in self.expectations if e["type"] in ROW_LEVEL)
        return Suite(self.name, (ROW_HASH,), rows)


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
    """The frame a suite checks: the table plus the derived columns its suite names."""
    if table == "papers":
        flags = pl.col("flags").list.len() if "flags" in frame.columns else pl.lit(0)
        return frame.with_columns(
            unresolved_macro_count=pl.col("unresolved_macros").list.len(),
            flag_count=flags.cast(pl.Int64),
        ).drop(
            "links",
            "authors",
            "keywords",
            "categories",
            "flags",
            "unresolved_macros",
            "abstract_raw",
            strict=False,
        )
    if table == "sources":
        return frame.with_columns(
            accounted=pl.col("accepted") + pl.col("rejected"),
            reject_share=pl.when(pl.col("records_seen") > 0)
            .then(pl.col("rejected") / pl.col("records_seen"))
            .otherwise(0.0),
        )
    if table == "embeddings":
        return frame.select(
            "paper_id",
            "model",
            "dim",
            nan_count=pl.col("embedding").list.eval(pl.element().is_nan()).list.sum(),
            norm=pl.col("embedding").list.eval(pl.element().pow(2)).list.sum().sqrt(),
        )
    return frame.select(pl.exclude(pl.List(pl.Utf8), pl.List(pl.Float32)))
