"""The data-quality page's content, gathered from dq_results and the tables it checked."""

from __future__ import annotations

import json

import duckdb
import polars as pl

from flows import ingest
from flows.core.lake import (
    LAKE,
    WarehouseError,
    attach,
    catalog_exists,
    connect,
    open_lake,
    published_versions,
    read_sql,
)
from flows.core.settings import Settings
from flows.core.tables import described
from flows.core.wording import common_root, outcome_lines, relative
from flows.validate.outcome import failed_in_order, outcome
from flows.validate.page.page import Check, Headline, Page, SuiteReport, observed, threshold
from flows.validate.page.rejects import reject_groups
from flows.validate.page.rows import failing_rows
from flows.validate.page.trend import history_rows, latest_trend, trend_of, with_run
from flows.validate.suites import suite_names

NAMED_ROWS = 5  # failing rows a headline names; its check lists the rest


def suite_description(name: str) -> str:
    """The table's one-line description (flows/core/tables.py)."""

    return described().get(name, "")


def check_id(suite: str, expectation: str, column: str | None, kwargs: dict) -> str:
    """A check's identity among one run's results."""
    return json.dumps([suite, expectation, column, kwargs], sort_keys=True, default=str)


def suite_reports(
    con: duckdb.DuckDBPyConnection, results: pl.DataFrame, root: str
) -> list[SuiteReport]:
    """Every suite in expectations/ (and any other the run checked): suites with blocking
    failures first, then those with warnings, then those that passed; within a suite,
    failed checks first."""
    rank = {(False, True): 0, (False, False): 1}
    raw = results.to_dicts()
    for check in raw:
        check["kwargs"] = json.loads(check["kwargs"]) if check["kwargs"] else {}
    raw.sort(
        key=lambda c: (
            c["suite"],
            rank.get((c["success"], c["blocking"]), 2),
            c["column_name"] or "",
            c["expectation"],
            json.dumps(c["kwargs"], sort_keys=True, default=str),
        )
    )
    rows = failing_rows(con, raw, root)
    checks: dict[str, list[Check]] = {}
    for check, found in zip(raw, rows, strict=True):
        value = json.loads(check["observed_value"]) if check["observed_value"] else None
        listed = checks.setdefault(check["suite"], [])
        listed.append(
            Check(
                suite=check["suite"],
                expectation=check["expectation"],
                column=check["column_name"],
                kwargs=check["kwargs"],
                severity=check["severity"],
                blocking=bool(check["blocking"]),
                success=bool(check["success"]),
                expected=threshold(check["expectation"], check["kwargs"], check["suite"]),
                observed=observed(check, value),
                element_count=check["element_count"],
                unexpected_count=check["unexpected_count"],
                observed_value=value,
                rows=found,
                more_rows=max((check["unexpected_count"] or 0) - len(found), 0) if found else 0,
                anchor=f"check-{check['suite']}-{len(listed)}",
            )
        )
    names = sorted(set(suite_names()) | set(checks))
    reports = [SuiteReport(n, suite_description(n), checks.get(n, [])) for n in names]
    return sorted(reports, key=lambda r: r.rank)


def headlines(
    results: pl.DataFrame, lines: list[tuple[str, str]], suites: list[SuiteReport]
) -> list[Headline]:
    """The run's lines of failed checks (`lines` after the outcome's), each with the first
    rows its check names."""
    checks = {
        check_id(c.suite, c.expectation, c.column, c.kwargs): c for s in suites for c in s.checks
    }
    out = []
    for (label, text), row in zip(lines[1:], failed_in_order(results).to_dicts(), strict=True):
        kwargs = json.loads(row["kwargs"]) if row["kwargs"] else {}
        check = checks[check_id(row["suite"], row["expectation"], row["column_name"], kwargs)]
        named = check.rows[:NAMED_ROWS]
        more = max(check.unexpected_count or 0, len(check.rows)) - len(named)
        out.append(Headline(label, text, check.anchor, named, more))
    return out


def file_rows(con: duckdb.DuckDBPyConnection, results: pl.DataFrame) -> list[dict]:
    """Per raw file: seen, accepted, rejected by rule, flags, error and warning."""
    try:
        sources = con.execute(read_sql("dq/files")).pl()
    except duckdb.CatalogException:
        return []
    if "warning" not in sources.columns:  # versions published before files had warnings
        sources = sources.with_columns(warning=pl.lit(None, dtype=pl.String))
    report = ingest.file_report(sources)
    if "warning" not in report.columns:
        report = report.with_columns(sources.select("warning"))
    flagged = {
        key
        for ids in results.filter((pl.col("suite") == "sources") & ~pl.col("success"))[
            "unexpected_ids"
        ].to_list()
        for key in ids or []
    }
    rows = []
    for row in report.iter_rows(named=True):
        status = (
            "error" if row["error"] else "warn" if row["warning"] or row["path"] in flagged else ""
        )
        rows.append(row | {"status": status})
    return rows


def gather(
    con: duckdb.DuckDBPyConnection,
    results: pl.DataFrame,
    history: pl.DataFrame,
    run_id: str,
    version: int | None,
    started_at: str = "",
) -> Page:
    """The page of one run from a connection with the run's tables in scope.

    Args:
        con: the run's tables (papers, sources, rejects, ...) in the default schema.
        results: the run's dq_results rows.
        history: earlier results for the trend (see trend_of), this run's included.
        version: the version the run published; None for a run that did not.
    """
    files = file_rows(con, results)
    root = common_root([f["path"] for f in files])
    for f in files:
        f["file"] = relative(f["path"], root)
    result = outcome(results)
    lines = outcome_lines(result.text, result.failures, result.warnings)
    suites = suite_reports(con, results, root)
    rejects, rejects_total = reject_groups(con, root)
    return Page(
        run_id=run_id,
        version=version,
        started_at=started_at,
        outcome=result.text,
        lines=lines,
        suites=suites,
        files=files,
        root=root,
        trend=trend_of(history),
        headlines=headlines(results, lines, suites),
        rejects=rejects,
        rejects_total=rejects_total,
    )


def build_page(
    settings: Settings, version: int | None = None, con: duckdb.DuckDBPyConnection | None = None
) -> Page:
    """The page of a published version (default: the latest).

    Args:
        con: a connection of this process with ducklake loaded and no catalog attached (the
            run's, which just published `version`): the catalog is attached on it for the
            page and detached after, saving a connection's load of the extension.

    Raises:
        WarehouseError: no warehouse, nothing published, or `version` is not published.
    """
    if con is None:
        with open_lake(settings, version, extensions=()) as lake:
            return version_page(lake, version)
    attach(con, settings, version=version, read_only=True)
    try:
        return version_page(con, version)
    finally:
        con.execute("use memory")
        con.execute(f"detach {LAKE}")


def version_page(con: duckdb.DuckDBPyConnection, version: int | None) -> Page:
    """The page of `version` (default: the latest) of the catalog attached on `con`."""
    versions = published_versions(con)
    version = version if version is not None else versions[-1]
    con.execute(f"set variable version = {int(version)}")
    run = con.execute(read_sql("report/run_summary")).pl().to_dicts()
    if not run:
        raise WarehouseError(f"version {version} has no recorded run")
    results = con.execute(read_sql("dq/run_results")).pl()
    history = history_rows(con, version)
    return gather(con, results, history, run[0]["run_id"], version, str(run[0]["started_at"] or ""))


def build_run_page(
    con: duckdb.DuckDBPyConnection, settings: Settings, run_id: str, results: pl.DataFrame
) -> Page:
    """The page of a run that did not publish, from its staged tables and results; its
    trend is the latest published versions and this run."""
    history = pl.DataFrame()
    try:
        if catalog_exists(settings):
            with open_lake(settings, extensions=()) as lake:
                history = latest_trend(lake)
    except WarehouseError:
        pass  # nothing published yet (or no catalog to reach): the trend is this run alone
    return gather(con, results, with_run(history, results, None), run_id, None)


def tables_read(results: pl.DataFrame) -> set[str]:
    """The tables `gather` reads for the page of `results`: the files, the rejects, and the
    tables of failing rows with the papers that name them."""
    failing = results.filter(~pl.col("success") & pl.col("unexpected_ids").list.len().gt(0))
    suites = set(failing["suite"].to_list())
    return {"sources", "rejects"} | suites | ({"papers"} if suites else set())


def build_page_while_publishing(
    tables: dict[str, pl.DataFrame], results: pl.DataFrame, earlier: pl.DataFrame, version: int
) -> Page:
    """The page of version `version`, gathered from the run that is committing it, as
    `build_page` gives it once the version is published: from the run's `tables` (its runs row
    among them), its dq_results rows and `earlier`, the trend's rows of the versions before
    (`latest_trend`). A run gathers it beside its commit, not after."""
    con = connect(extensions=())
    try:
        for name in tables_read(results) & set(tables):
            con.register(name, tables[name])
        con.register("runs", tables["runs"].with_columns(snapshot_id=pl.lit(version)))
        con.execute(f"set variable version = {int(version)}")
        run = con.execute(read_sql("report/run_summary")).pl().row(0, named=True)
        history = with_run(earlier, results, version)
        return gather(con, results, history, run["run_id"], version, str(run["started_at"] or ""))
    finally:
        con.close()
