"""What the data-quality page shows: its dataclasses, and checks and values in words."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from flows.validate.headlines import KEYS_OF_TABLE, noun, number

VALUE_CHARS = 120  # longest offending value shown; longer text is cut around the match
THIS_RUN = "this run"


@dataclass
class FailingRow:
    """A row an expectation found wanting, as a person knows it."""

    key: str  # the row's id as the check reported it (id columns joined by "/")
    title: str | None  # paper title (or its first words), topic label, reject snippet
    untitled: bool  # the title is the abstract's first words
    location: str | None  # file:line, relative to the page's root folder
    path: str | None  # the file's full path
    value: str  # the offending value(s)
    # The paper(s) the row is about (two for a pair): paper_id, title, untitled.
    papers: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Check:
    """One expectation's result in one run."""

    suite: str
    expectation: str
    column: str | None
    kwargs: dict[str, Any]
    severity: str
    blocking: bool
    success: bool
    expected: str
    observed: str
    element_count: int | None
    unexpected_count: int | None
    observed_value: Any
    rows: list[FailingRow] = field(default_factory=list)
    more_rows: int = 0  # failing rows beyond those listed
    anchor: str = ""  # the check's id on the page

    @property
    def outcome(self) -> str:
        if self.success:
            return "passed"
        return "failed: blocks the publish" if self.blocking else "failed: warning"


@dataclass
class Headline:
    """A failed check in the words the run printed, with the first rows it names."""

    label: str  # data-quality failure | data-quality warning
    text: str
    anchor: str  # the check's id on the page
    rows: list[FailingRow]
    more: int  # failing rows beyond those named here


@dataclass
class RejectedRecord:
    """A record that was not accepted, as the page lists it."""

    location: str  # file:line, relative to the page's root folder
    record_no: int | None
    reason: str
    snippet: str  # its first characters, on one line


@dataclass
class RejectGroup:
    """The rejected records of one file that broke one rule."""

    file: str
    path: str | None
    rule: str
    count: int  # every reject of this file and rule
    records: list[RejectedRecord]

    @property
    def more(self) -> int:
        return self.count - len(self.records)


@dataclass
class SuiteReport:
    """A suite (one per table) and its checks, failures first."""

    name: str
    description: str
    checks: list[Check]

    @property
    def failed_blocking(self) -> int:
        return sum(1 for c in self.checks if not c.success and c.blocking)

    @property
    def failed_warning(self) -> int:
        return sum(1 for c in self.checks if not c.success and not c.blocking)

    @property
    def passed(self) -> int:
        return sum(1 for c in self.checks if c.success)

    @property
    def rows_checked(self) -> int | None:
        counts = [
            c.element_count
            for c in self.checks
            if c.element_count is not None and c.observed_value is None
        ]
        return max(counts) if counts else None

    @property
    def status(self) -> str:
        if not self.checks:
            return "not checked"
        return status_of(self.failed_blocking, self.failed_warning)

    @property
    def rank(self) -> int:
        """Where the suite comes on the page: failures, then warnings, then passed."""
        return ("failed", "passed with warnings", "passed", "not checked").index(self.status)


@dataclass
class TrendPoint:
    """One suite in one version (or in the run that did not publish)."""

    label: str
    version: int | None
    status: str
    failed_blocking: int
    failed_warning: int
    unexpected_rows: int


@dataclass
class SuiteTrend:
    """A suite over recent versions: a point per version, a row of values per expectation."""

    suite: str
    points: list[TrendPoint]
    rows: list[dict[str, Any]]  # label, cells (one per point: text and success, or None)


@dataclass
class Page:
    """Everything the data-quality page shows."""

    run_id: str
    version: int | None  # None: the run stopped before publishing
    started_at: str
    outcome: str
    lines: list[tuple[str, str]]
    suites: list[SuiteReport]
    files: list[dict[str, Any]]
    root: str  # the folder file locations are relative to
    trend: list[SuiteTrend]
    data_docs: str | None = None  # link to the GX Data Docs index, relative to the page
    headlines: list[Headline] = field(default_factory=list)  # the failed checks, as told
    rejects: list[RejectGroup] = field(default_factory=list)  # by file, then rule
    rejects_total: int = 0  # every rejected record of the run, listed or not
    warehouse: str | None = None  # for the command that lists every reject

    @property
    def rejects_listed(self) -> int:
        return sum(len(g.records) for g in self.rejects)

    @property
    def rejects_query(self) -> str:
        """The command that lists every rejected record of this version."""
        where = f" -w {self.warehouse}" if self.warehouse else ""
        version = f" --version {self.version}" if self.version is not None else ""
        return (
            'paperlake query "select source_path, line, rule, reason, raw_snippet from '
            f'rejects order by source_path, rule, record_no"{where}{version}'
        )

    @property
    def title(self) -> str:
        if self.version is not None:
            return f"version {self.version}"
        return f"run {self.run_id[:8]} (stopped before publish)"


def bounds(kwargs: dict[str, Any]) -> str:
    """`between 1 and 1500`, `at least 20`, `at most 0` from min_value/max_value."""
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    above = ">" if kwargs.get("strict_min") else "≥"
    below = "<" if kwargs.get("strict_max") else "≤"
    if low is not None and high is not None:
        if low == high and not (kwargs.get("strict_min") or kwargs.get("strict_max")):
            return f"= {number(low)}"
        return f"{above} {number(low)} and {below} {number(high)}"
    if low is not None:
        return f"{above} {number(low)}"
    if high is not None:
        return f"{below} {number(high)}"
    return "any"


def threshold(expectation: str, kwargs: dict[str, Any], suite: str = "") -> str:
    """What an expectation requires, in words ("every neighbor_id of neighbors is a paper"
    for a reference between tables)."""
    if expectation == KEYS_OF_TABLE:
        of = f" of {suite}" if suite else ""
        return f"every {kwargs.get('column')}{of} is a {noun(kwargs.get('table') or '', 1)}"
    text = {
        "expect_column_values_to_not_be_null": "no missing values",
        "expect_column_values_to_be_null": "every value missing",
        "expect_column_values_to_be_unique": "no repeated values",
        "expect_column_values_to_be_between": f"every value {bounds(kwargs)}",
        "expect_column_value_lengths_to_be_between": f"every length {bounds(kwargs)}",
        "expect_column_values_to_match_regex": f"every value matches {kwargs.get('regex')}",
        "expect_column_values_to_not_match_regex": f"no value matches {kwargs.get('regex')}",
        "expect_column_values_to_be_in_set": "every value one of "
        + ", ".join(map(str, kwargs.get("value_set") or [])),
        "expect_compound_columns_to_be_unique": "no repeated ("
        + ", ".join(kwargs.get("column_list") or [])
        + ")",
        "expect_column_pair_values_to_be_equal": f"{kwargs.get('column_A')} = "
        f"{kwargs.get('column_B')} in every row",
        "expect_column_pair_values_a_to_be_greater_than_b": f"{kwargs.get('column_A')} "
        f"{'≥' if kwargs.get('or_equal') else '>'} {kwargs.get('column_B')} in every row",
        "expect_table_row_count_to_equal": f"exactly {number(kwargs.get('value'))} rows",
    }.get(expectation)
    if text is None:
        shown = {k: v for k, v in kwargs.items() if k not in ("column", "mostly")}
        text = json.dumps(shown, sort_keys=True, default=str)
    mostly = kwargs.get("mostly")
    if mostly is not None and mostly < 1:
        text += f", in at least {mostly:.0%} of rows"
    return text


def observed(check: dict[str, Any], value: Any) -> str:
    """What the run found: the observed value of a table-level check, else unexpected rows
    of the total."""
    if value is not None:
        if check["expectation"] == "expect_table_row_count_to_equal":
            return f"{number(value)} rows"
        return number(value) if not isinstance(value, dict | list) else json.dumps(value)
    rows, bad = check["element_count"], check["unexpected_count"]
    if rows is None or bad is None:
        return "—"
    if bad == 0:
        return f"0 of {rows} rows unexpected"
    return f"{bad} of {rows} rows unexpected ({bad / rows:.1%})" if rows else f"{bad} rows"


def expectation_key(expectation: str, column: str | None, kwargs: str) -> str:
    """An expectation's identity across versions: its numbers may come from parameters
    (a row count, a word limit), so only their names count, not their values."""
    spec = json.loads(kwargs) if kwargs else {}
    shape = {
        k: "#" if isinstance(v, int | float) and not isinstance(v, bool) else v
        for k, v in spec.items()
    }
    return json.dumps([expectation, column, shape], sort_keys=True, default=str)


def short_value(value: Any, pattern: str | None = None) -> str:
    """An offending value for a table cell: long text is cut around the regex's match."""
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:.6g}"
    if not isinstance(value, str):
        return str(value)
    if len(value) <= VALUE_CHARS:
        return value
    start = 0
    if pattern:
        try:
            found = re.search(pattern, value)
        except re.error:
            found = None
        if found:
            start = max(found.start() - VALUE_CHARS // 3, 0)
    piece = value[start : start + VALUE_CHARS]
    return ("…" if start else "") + piece + ("…" if start + VALUE_CHARS < len(value) else "")


def status_of(failed_blocking: int, failed_warning: int) -> str:
    if failed_blocking:
        return "failed"
    return "passed with warnings" if failed_warning else "passed"
