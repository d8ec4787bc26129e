"""A run's data-quality outcome from its dq_results rows, and the failures that stop it."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl


class DataQualityError(RuntimeError):
    """Blocking expectations failed; the run must not publish."""

    def __init__(self, failures: pl.DataFrame):
        self.failures = failures
        lines = [describe_failure(r) for r in failures.iter_rows(named=True)]
        super().__init__("blocking data-quality checks failed:\n  " + "\n  ".join(lines))


def describe_failure(row: dict, shown: int = 5) -> str:
    """One line naming a failed expectation, its column and the first offending rows."""
    text = f"{row['suite']}.{row['expectation']}({row['column_name'] or ''})"
    if row["unexpected_count"]:
        text += f": {row['unexpected_count']} unexpected"
    ids = row["unexpected_ids"] or []
    if ids:
        more = row["unexpected_count"] - shown if (row["unexpected_count"] or 0) > shown else 0
        text += f" in rows {', '.join(ids[:shown])}" + (f" and {more} more" if more else "")
    if row["observed_value"] and not ids:
        text += f": observed {row['observed_value']}"
    return text


def blocking_failures(results: pl.DataFrame) -> pl.DataFrame:
    """The failed blocking expectations among `results`."""
    return results.filter(pl.col("blocking") & ~pl.col("success"))


@dataclass(frozen=True)
class Outcome:
    """A run's data-quality outcome and its failed expectations, one line each."""

    text: str  # passed | passed with warnings | failed
    failures: tuple[str, ...] = ()  # blocking expectations that failed
    warnings: tuple[str, ...] = ()  # warning expectations that failed


def outcome(results: pl.DataFrame) -> Outcome:
    """The outcome of a run's dq_results rows, lines in a fixed order (suite, expectation)."""
    failed = results.filter(~pl.col("success")).sort(
        "suite", "expectation", "column_name", "kwargs", nulls_last=True, maintain_order=True
    )
    failures = tuple(describe_failure(r) for r in failed.filter("blocking").iter_rows(named=True))
    warned = tuple(
        describe_failure(r) for r in failed.filter(~pl.col("blocking")).iter_rows(named=True)
    )
    text = "failed" if failures else "passed with warnings" if warned else "passed"
    return Outcome(text, failures, warned)
