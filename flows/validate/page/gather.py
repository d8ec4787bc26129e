"""The data-quality page's content, gathered from dq_results and the tables it checked."""

from __future__ import annotations

import json
import os
from typing import Any

import duckdb
import polars as pl

from flows import ingest, validate
from flows.core.lake import (
    LAKE,
    WarehouseError,
    attach,
    catalog_exists,
    connect,
    define_paper_title,
    open_lake,
    published_versions,
    read_sql,
)
from flows.core.settings import Settings
from flows.core.wording import outcome_lines
from flows.validate.page.page import (
    THIS_RUN,
    Check,
    FailingRow,
    Page,
    SuiteReport,
    SuiteTrend,
    TrendPoint,
    expectation_key,
    number,
    observed,
    short_value,
    status_of,
    threshold,
)

TREND_VERSIONS = 8  # versions the trend shows, the page's own last


def check_columns(kwargs: dict[str, Any]) -> list[str]:
    """The columns an expectation reads."""
    if kwargs.get("column"):
        return [kwargs["column"]]
    if kwargs.get("column_list"):
        return list(kwargs["column_list"])
    return [c for c in (kwargs.get("column_A"), kwargs.get("column_B")) if c]


def key_expression(id_columns: tuple[str, ...]) -> duckdb.Expression:
    """A table row's id as the checks report it: id columns as text, joined by "/"."""
    parts = [
        duckdb.CoalesceOperator(
            duckdb.ColumnExpression(c).cast(duckdb.sqltype("VARCHAR")),
            duckdb.ConstantExpression("None"),
        )
        for c in id_columns
    ]
    return duckdb.FunctionExpression("concat_ws", duckdb.ConstantExpression("/"), *parts)


def rows_by_key(
    con: duckdb.DuckDBPyConnection, table: str, id_columns: tuple[str, ...], keys: list[str]
) -> pl.DataFrame:
    """The rows of `table` whose ids are among `keys`, with the columns its suite checks."""
    if not keys or not id_columns:
        return pl.DataFrame()
    try:
        relation = con.table(table)
    except duckdb.CatalogException:
        return pl.DataFrame()  # a table this version does not have
    wanted = [duckdb.ConstantExpression(k) for k in keys]
    frame = relation.filter(key_expression(id_columns).isin(*wanted)).pl()
    prepared = validate.prepare(table, frame)
    key = pl.concat_str(
        [pl.col(c).cast(pl.String).fill_null("None") for c in id_columns], separator="/"
    )
    return prepared.with_columns(_key=key)


def relative(path: str | None, root: str) -> str | None:
    if path is None:
        return None
    return path[len(root) + 1 :] if root and path.startswith(root + "/") else path


def common_root(paths: list[str]) -> str:
    """The folder all raw files lie in, so locations read `file.txt:12`."""
    folders = [os.path.dirname(p) for p in paths if p]
    if not folders:
        return ""
    try:
        return os.path.commonpath(folders)
    except ValueError:  # absolute and relative paths mixed
        return ""


def paper_labels(con: duckdb.DuckDBPyConnection, paper_ids: set[str]) -> dict[str, dict]:
    """Title (or first words) and first location of each paper (sql/dq/paper_labels.sql)."""
    if not paper_ids:
        return {}
    define_paper_title(con)
    con.execute("set variable paper_ids = ?", [sorted(paper_ids)])
    try:
        frame = con.execute(read_sql("dq/paper_labels")).pl()
    except duckdb.CatalogException:
        return {}
    return {r["paper_id"]: r for r in frame.iter_rows(named=True)}


def identity(
    suite: str, key: str, row: dict[str, Any], labels: dict[str, dict]
) -> tuple[str | None, bool, str | None, int | None, list[dict[str, Any]]]:
    """How a person knows a row: (title, untitled, file, line, papers it is about)."""
    first = row.get("paper_id") or row.get("paper_a")
    if first:
        # A pair (duplicates, neighbors) names both papers and is located at the first.
        second = row.get("paper_b") or row.get("neighbor_id")
        papers = [
            {
                "paper_id": paper_id,
                "title": labels.get(paper_id, {}).get("title"),
                "untitled": bool(labels.get(paper_id, {}).get("untitled")),
            }
            for paper_id in (first, second)
            if paper_id
        ]
        named = any(p["title"] for p in papers)
        title = " | ".join(p["title"] or p["paper_id"] for p in papers) if named else None
        label = labels.get(first, {})
        return title, papers[0]["untitled"], label.get("source_path"), label.get("line"), papers
    if suite == "rejects":
        snippet = row.get("raw_snippet") or row.get("reason")
        return short_value(snippet), True, row.get("source_path"), row.get("line"), []
    if suite == "sources":
        return None, False, row.get("path") or key, None, []
    if suite == "topics":
        return row.get("label"), False, None, None, []
    return None, False, None, None, []


def failing_row(
    check: dict[str, Any], key: str, row: dict[str, Any], labels: dict[str, dict], root: str
) -> FailingRow:
    """One failing row of a check: who it is, where it was read, what it holds."""
    columns = check_columns(check["kwargs"])
    values = [
        short_value(row.get(c), check["kwargs"].get("regex")) if row else "—" for c in columns
    ]
    value = (
        values[0]
        if len(values) == 1
        else ", ".join(f"{c} = {v}" for c, v in zip(columns, values, strict=True))
    )
    title, untitled, path, line, papers = identity(check["suite"], key, row, labels)
    location = relative(path, root)
    if location and line is not None:
        location = f"{location}:{line}"
    return FailingRow(key, title, untitled, location, path, value, papers)


def failing_rows(
    con: duckdb.DuckDBPyConnection, checks: list[dict[str, Any]], root: str
) -> list[list[FailingRow]]:
    """The listed failing rows of every check (none for checks that passed)."""
    wanted: dict[str, set[str]] = {}
    for check in checks:
        if not check["success"] and check["unexpected_ids"]:
            wanted.setdefault(check["suite"], set()).update(check["unexpected_ids"])
    tables: dict[str, dict[str, dict]] = {}
    for suite, keys in wanted.items():
        frame = rows_by_key(con, suite, validate.Suite.load(suite).id_columns, sorted(keys))
        tables[suite] = {r["_key"]: r for r in frame.iter_rows(named=True)} if frame.height else {}
    papers = {
        r[c]
        for rows in tables.values()
        for r in rows.values()
        for c in ("paper_id", "paper_a", "paper_b", "neighbor_id")
        if r.get(c)
    }
    labels = paper_labels(con, papers)
    return [
        []
        if check["success"]
        else [
            failing_row(check, key, tables.get(check["suite"], {}).get(key, {}), labels, root)
            for key in check["unexpected_ids"] or []
        ]
        for check in checks
    ]


def suite_description(name: str) -> str:
    """The table's one-line description (flows/core/tables.py)."""
    from flows.core.tables import BY_NAME

    return BY_NAME[name].description if name in BY_NAME else ""


def suite_reports(
    con: duckdb.DuckDBPyConnection, results: pl.DataFrame, root: str
) -> list[SuiteReport]:
    """Every suite in expectations/ (and any other the run checked), failures first."""
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
        checks.setdefault(check["suite"], []).append(
            Check(
                suite=check["suite"],
                expectation=check["expectation"],
                column=check["column_name"],
                kwargs=check["kwargs"],
                severity=check["severity"],
                blocking=bool(check["blocking"]),
                success=bool(check["success"]),
                expected=threshold(check["expectation"], check["kwargs"]),
                observed=observed(check, value),
                element_count=check["element_count"],
                unexpected_count=check["unexpected_count"],
                observed_value=value,
                rows=found,
                more_rows=max((check["unexpected_count"] or 0) - len(found), 0) if found else 0,
            )
        )
    names = sorted(set(validate.suite_names()) | set(checks))
    return [SuiteReport(n, suite_description(n), checks.get(n, [])) for n in names]


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
        entry["label"] = f"{r['column_name'] or 'table'}: {threshold(r['expectation'], kwargs)}"
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
    result = validate.outcome(results)
    return Page(
        run_id=run_id,
        version=version,
        started_at=started_at,
        outcome=result.text,
        lines=outcome_lines(result.text, result.failures, result.warnings),
        suites=suite_reports(con, results, root),
        files=files,
        root=root,
        trend=trend_of(history),
    )


def build(
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


def build_for_run(
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


def tables_read(results: pl.DataFrame) -> set[str]:
    """The tables `gather` reads for the page of `results`: the files, and the tables of
    failing rows with the papers that name them."""
    failing = results.filter(~pl.col("success") & pl.col("unexpected_ids").list.len().gt(0))
    suites = set(failing["suite"].to_list())
    return {"sources"} | suites | ({"papers"} if suites else set())


def build_while_publishing(
    tables: dict[str, pl.DataFrame], results: pl.DataFrame, earlier: pl.DataFrame, version: int
) -> Page:
    """The page of version `version`, gathered from the run that is committing it, as
    `build` gives it once the version is published: from the run's `tables` (its runs row
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
