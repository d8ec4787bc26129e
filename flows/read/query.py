"""`paperlake query`: a user's SQL over one version, able to read that version and nothing else.

Four locks, each for what the others miss:
- the parser: only statements that read (SELECT, WITH, FROM, DESCRIBE, SHOW, SUMMARIZE,
  EXPLAIN) run;
- the calls, as DuckDB parses them (never the text, which comments, quotes and escapes
  disguise): a DuckLake function that writes is refused before it is bound, as binding
  `ducklake_set_option` on a read-only catalog crashes the process; `query()` must be given
  one string, whose SQL is checked in turn, since SQL it builds (`'ducklake_' || ...`) exists
  only once bound;
- the plan: each statement is planned without running, and a plan holding an operator that
  writes (any DuckLake function but those that read, a file copy, a checkpoint) or that runs
  SQL the plan does not show is refused: what runs is what the plan holds. The READ_ONLY
  attach alone does not hold: `ducklake_cleanup_old_files` deletes its files, then fails to
  update the catalog;
- DuckDB's settings: files only under the warehouse's data path, no extension installed or
  loaded, and the configuration locked, so that no SET undoes them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb
from duckdb.sqltypes import DuckDBPyType

from flows.core.errors import QueryRefused, WarehouseError
from flows.core.lake import LAKE, open_lake
from flows.core.settings import Settings

if TYPE_CHECKING:
    import polars as pl

READ_STATEMENTS = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
# DuckLake's functions that change the catalog or its files, by the name after `ducklake_`
# (also callable as `lake.<name>`).
DUCKLAKE_WRITERS = frozenset(
    {
        "add_data_files",
        "cleanup_old_files",
        "commit",
        "delete_orphaned_files",
        "expire_snapshots",
        "flush_inlined_data",
        "merge_adjacent_files",
        "rewrite_data_files",
        "set_commit_message",
        "set_option",
    }
)
# DuckLake's operators and table functions that only read. Any other DUCKLAKE_ name in a
# plan (cleanup, expire, compaction, ... and whatever a later DuckLake adds) is refused.
DUCKLAKE_READERS = frozenset(
    {
        "DUCKLAKE_SCAN",
        "DUCKLAKE_SNAPSHOTS",
        "DUCKLAKE_CURRENT_SNAPSHOT",
        "DUCKLAKE_LAST_COMMITTED_SNAPSHOT",
        "DUCKLAKE_TABLE_INFO",
        "DUCKLAKE_LIST_FILES",
        "DUCKLAKE_TABLE_INSERTIONS",
        "DUCKLAKE_TABLE_DELETIONS",
        "DUCKLAKE_OPTIONS",
        "DUCKLAKE_SETTINGS",
    }
)
# DuckDB's own operators and table functions that a SELECT can plan and that write, or that
# run SQL given as data at run time (which no plan shows).
WRITERS = frozenset(
    {
        "COPY_TO_FILE",
        "BATCH_COPY_TO_FILE",
        "INSERT",
        "UPDATE",
        "DELETE",
        "CHECKPOINT",
        "FORCE_CHECKPOINT",
        "JSON_EXECUTE_SERIALIZED_SQL",
    }
)
# The statement under EXPLAIN [ANALYZE] [(options)], after any leading comments.
EXPLAINED = re.compile(
    r"^(?:\s+|--[^\n]*\n|/\*.*?\*/)*explain\s+(?:analy[sz]e\s+|\([^)]*\)\s*)?",
    re.IGNORECASE | re.DOTALL,
)
DENIED_FILE = re.compile(r'Cannot access (?:file|directory) "([^"]*)"')
MISSING_EXTENSION = re.compile(
    r'with name "?([^" ]+)"? is not in the catalog, but it exists in the (\w+) extension'
    r"|requires the extension (\w+) to be loaded"
)
ONLY_READS = "`paperlake query` only reads"


def read_statements(sql: str) -> list[duckdb.Statement]:
    """The statements of `sql`, checked by DuckDB's own parser to be only ones that read.

    Raises:
        QueryRefused: naming the first statement type that is not allowed.
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRefused(f"the query does not parse: {exc}") from None
    if not statements:
        raise QueryRefused("the query is empty: give one SELECT statement (or several)")
    for statement in statements:
        if statement.type not in READ_STATEMENTS:
            kind = {"SET": "SET (or USE)"}.get(statement.type.name, statement.type.name)
            raise QueryRefused(
                f"refused a {kind} statement: {ONLY_READS} "
                f"(SELECT, WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN)"
            )
    return statements


def checked_statements(sql: str) -> list[duckdb.Statement]:
    """The statements of `sql` once the parser finds only statements that read and no call
    that writes (see read_statements and check_calls); nothing is opened or bound."""
    statements = read_statements(sql)
    with duckdb.connect() as con:
        for statement in statements:
            check_calls(con, planned(statement))
    return statements


def read_only_query(sql: str) -> str:
    """`sql`, once checked_statements finds nothing to refuse."""
    checked_statements(sql)
    return sql


def planned(statement: duckdb.Statement) -> str:
    """The SELECT that `statement` runs: itself, or the one under EXPLAIN [ANALYZE], which
    EXPLAIN ANALYZE runs.

    Raises:
        QueryRefused: an EXPLAIN whose statement cannot be told apart.
    """
    if statement.type != duckdb.StatementType.EXPLAIN:
        return statement.query
    found = EXPLAINED.match(statement.query)
    inner = read_statements(statement.query[found.end() :]) if found else []
    if len(inner) != 1:
        raise QueryRefused("refused an EXPLAIN: give EXPLAIN [ANALYZE] and one SELECT after it")
    return planned(inner[0])


def sql_text(value: str) -> str:
    """`value` as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def table_functions(tree: Any) -> Iterator[dict]:
    """Every table function call in a parsed statement (json_serialize_sql's tree)."""
    if isinstance(tree, dict):
        if tree.get("type") == "TABLE_FUNCTION":
            yield tree["function"]
        tree = list(tree.values())
    if isinstance(tree, list):
        for node in tree:
            yield from table_functions(node)


def check_calls(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse a DuckLake function that writes, or a `query()` not given one string, in the
    SELECT `sql` as DuckDB parses it (nothing is bound); the SQL of each `query()` in turn.

    Raises:
        QueryRefused: naming the function.
    """
    parsed = json.loads(con.execute(f"select json_serialize_sql({sql_text(sql)})").fetchone()[0])
    if parsed.get("error"):
        raise QueryRefused(f"refused a statement that cannot be checked: {parsed['error_message']}")
    for function in table_functions(parsed["statements"]):
        name = function["function_name"].lower()
        if name.removeprefix("ducklake_") in DUCKLAKE_WRITERS:
            raise QueryRefused(f"refused {name}: {ONLY_READS}")
        if name == "query":
            given = function["children"][0] if function["children"] else {}
            value = given.get("value", {}) if given.get("type") == "VALUE_CONSTANT" else {}
            if value.get("type", {}).get("id") != "VARCHAR" or value.get("is_null"):
                raise QueryRefused("refused query() of built SQL: give query() one string")
            for statement in read_statements(value["value"]):
                check_calls(con, planned(statement))


def operators(plan: list[dict]) -> set[str]:
    """Every operator and table function named in a JSON physical plan."""
    names = set()
    for node in plan:
        names.add(node.get("name", "").strip().upper())
        names.add(str(node.get("extra_info", {}).get("Function", "")).upper())
        names |= operators(node.get("children", []))
    return names - {""}


def check_plan(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Plan the SELECT `sql` (without running it) and refuse it if its plan could write.

    Raises:
        QueryRefused: naming the first such function or operator.
    """
    rows = con.execute(f"EXPLAIN (FORMAT json) {sql}").fetchall()
    names = set().union(*(operators(json.loads(plan)) for _, plan in rows))
    refused = {n for n in names if n.startswith("DUCKLAKE_") and n not in DUCKLAKE_READERS}
    refused |= names & WRITERS
    if refused:
        raise QueryRefused(f"refused {min(refused).lower()}: {ONLY_READS}")


def lock_down(con: duckdb.DuckDBPyConnection) -> str:
    """Limit `con` to the data files of the catalog it has attached; returns their path.

    Set once the catalog is attached and vss and fts loaded, as neither could be later.
    DuckDB still reads the attached catalog's own file, and spills to its temp directory.
    """
    data_path = con.execute(f"select data_path from ducklake_settings('{LAKE}')").fetchone()[0]
    for statement in (
        "set autoinstall_known_extensions = false",
        "set autoload_known_extensions = false",
        f"set allowed_directories = [{sql_text(data_path)}]",
        "set enable_external_access = false",
        "set lock_configuration = true",
    ):
        con.execute(statement)
    return data_path


@dataclass
class LockedLake:
    """A connection to one version that reads its data files and nothing else."""

    con: duckdb.DuckDBPyConnection
    data_path: str


def open_locked(settings: Settings, version: int | None = None) -> LockedLake:
    """The warehouse at `version` (or the latest), locked down (see lock_down)."""
    con = open_lake(settings, version)
    try:
        return LockedLake(con, lock_down(con))
    except BaseException:
        con.close()
        raise


def one_line(exc: duckdb.Error, data_path: str) -> WarehouseError | None:
    """DuckDB's error for a file outside the data path, a missing extension or a write to
    the catalog, in one line; None for any other error."""
    text = str(exc)
    if isinstance(exc, duckdb.PermissionException) and (denied := DENIED_FILE.search(text)):
        return QueryRefused(
            f"refused reading {denied.group(1)}: `paperlake query` reads only the "
            f"warehouse's data files, under {data_path}"
        )
    if missing := MISSING_EXTENSION.search(text):
        extension = missing.group(2) or missing.group(3)
        what = f"{missing.group(1)} needs" if missing.group(1) else "this needs"
        return QueryRefused(
            f"refused: {what} DuckDB's {extension} extension, which `paperlake query` does "
            "not install or load (it has ducklake, vss and fts)"
        )
    if "readonly database" in text or "read-only mode" in text:
        return QueryRefused(f"refused a query that writes to the catalog: {ONLY_READS}")
    return None


def run_query(settings: Settings, sql: str, version: int | None = None) -> pl.DataFrame:
    """Run the read-only `sql` on a version; the last statement's rows, ready to print.

    Raises:
        QueryRefused: a statement, call, plan or file the lock-down refuses.
        WarehouseError: no such warehouse or version.
        duckdb.Error: the query itself failed.
    """
    statements = checked_statements(sql)
    lake = open_locked(settings, version)
    with lake.con as con:
        try:
            for statement in statements:
                check_plan(con, planned(statement))
            for statement in statements[:-1]:
                con.execute(statement.query)
            return fetch(con, statements[-1])
        except BaseException as exc:
            # A stop signal ends DuckDB's wait for the result but not its tasks, and the
            # connection's close would wait for the query to finish.
            con.interrupt()
            if isinstance(exc, duckdb.Error) and (line := one_line(exc, lake.data_path)):
                raise line from None
            raise


# Types that polars cannot hold, or holds wrongly (a time zone dropped, a bit string read as
# its bytes, an unsigned 128-bit integer wrapped): shown as DuckDB's own text of them.
AS_TEXT = {"interval", "union", "bit", "blob", "bignum", "uhugeint", "time with time zone"}
# Dates and timestamps may be infinite. At the top level the printer says so (output.py);
# inside a list or struct they are shown as DuckDB's text. Seconds and milliseconds are
# widened to microseconds, which polars reads (it multiplies infinity into a wrong date).
TEMPORAL = {"date", "timestamp", "timestamp_ns", "timestamp with time zone"}
WIDENED = {"timestamp_s", "timestamp_ms"}
NESTED = {"list", "array", "struct", "map"}


def shown_as_text(kind: DuckDBPyType, nested: bool = False) -> bool:
    """True for a column type that polars cannot print faithfully (see AS_TEXT)."""
    if kind.id in AS_TEXT or (nested and kind.id in TEMPORAL | WIDENED):
        return True
    if kind.id in NESTED:
        children = (c for _, c in kind.children if isinstance(c, DuckDBPyType))
        return any(shown_as_text(child, nested=True) for child in children)
    return False


def printable(relation: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """`relation` with the columns polars cannot print cast by DuckDB (itself if none)."""
    columns, changed = [], False
    for i, (name, kind) in enumerate(zip(relation.columns, relation.types, strict=True)):
        cast = "varchar" if shown_as_text(kind) else "timestamp" if kind.id in WIDENED else ""
        alias = '"' + name.replace('"', '""') + '"'
        columns.append(f"#{i + 1}::{cast} as {alias}" if cast else f"#{i + 1} as {alias}")
        changed = changed or bool(cast)
    return relation.select(", ".join(columns)) if changed else relation


def fetch(con: duckdb.DuckDBPyConnection, statement: duckdb.Statement) -> pl.DataFrame:
    """The rows of `statement` as a polars frame that every format prints."""
    if statement.type == duckdb.StatementType.EXPLAIN:
        return con.execute(statement.query).pl()  # its columns are text
    return printable(con.sql(statement.query)).pl()
