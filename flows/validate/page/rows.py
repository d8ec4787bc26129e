"""The failing rows of a version's checks as a person knows them: title, file:line and the
offending value, read from the tables the checks named them in."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

from flows.core.lake import define_paper_title, read_sql
from flows.core.wording import relative
from flows.validate.page.page import FailingRow, short_value
from flows.validate.suites import Suite, prepare


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
    prepared = prepare(table, frame)
    key = pl.concat_str(
        [pl.col(c).cast(pl.String).fill_null("None") for c in id_columns], separator="/"
    )
    return prepared.with_columns(_key=key)


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
        frame = rows_by_key(con, suite, Suite.load(suite).id_columns, sorted(keys))
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
