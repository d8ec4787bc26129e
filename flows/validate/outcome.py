"""A run's data-quality outcome from its dq_results rows, and the failures that stop it."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from flows.validate.headlines import headline


class DataQualityError(RuntimeError):
    """Blocking expectations failed; the run must not publish."""

    def __init__(self, failures: pl.DataFrame):
        self.failures = failures
        lines = [headline(r) for r in failures.iter_rows(named=True)]
        super().__init__("blocking data-quality checks failed:\n  " + "\n  ".join(lines))


def blocking_failures(results: pl.DataFrame) -> pl.DataFrame:
    """The failed blocking expectations among `results`."""
    return results.filter(pl.col("blocking") & ~pl.col("success"))


@dataclass(frozen=True)
class Outcome:
    """A run's data-quality outcome and its failed expectations, one line each."""

    text: str  # passed | passed with warnings | failed
    failures: tuple[str, ...] = ()  # blocking expectations that failed
    warnings: tuple[str, ...] = ()  # warning expectations that failed


def failed_in_order(results: pl.DataFrame) -> pl.DataFrame:
    """The failed rows of `results` in the order their lines are told: blocking first, then
    by suite, expectation, column and arguments."""
    return results.filter(~pl.col("success")).sort(
        pl.col("blocking").not_(),
        "suite",
        "expectation",
        "column_name",
        "kwargs",
        nulls_last=True,
        maintain_order=True,
    )


def outcome(results: pl.DataFrame) -> Outcome:
    """The outcome of a run's dq_results rows, lines in a fixed order (`failed_in_order`)."""
    failed = failed_in_order(results)
    failures = tuple(headline(r) for r in failed.filter("blocking").iter_rows(named=True))
    warned = tuple(headline(r) for r in failed.filter(~pl.col("blocking")).iter_rows(named=True))
    text = "failed" if failures else "passed with warnings" if warned else "passed"
    return Outcome(text, failures, warned)
