"""The staging database of a publish: the run's tables in memory.main, the catalog
attached beside it as `lake`, and what the plan and the commit ask of both."""

from __future__ import annotations

import logging

import duckdb

from flows.core import data_path
from flows.core.lake import LAKE, catalog_name
from flows.core.settings import Settings
from flows.core.tables import history_tables, keyed_tables

# Published tables and the columns that identify a row in each (flows/core/tables.py), and the
# tables that keep a row for every run, appended to.
TABLE_KEYS = keyed_tables()
HISTORY_TABLES = tuple(history_tables())


Columns = dict[str, list[tuple[str, str]]]  # table -> (column, type), in order


def table_columns(con: duckdb.DuckDBPyConnection, database: str) -> Columns:
    """The columns of every table in `database`.main, read in one query."""
    rows = con.execute(
        "select table_name, column_name, data_type from duckdb_columns() "
        "where database_name = ? and schema_name = 'main' order by table_name, column_index",
        [database],
    ).fetchall()
    found: Columns = {}
    for table, column, dtype in rows:
        found.setdefault(table, []).append((column, dtype))
    return found


def lake_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The tables of the attached catalog."""
    rows = con.execute("select table_name from duckdb_tables() where database_name = ?", [LAKE])
    return {r[0] for r in rows.fetchall()}


def table_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(
        con.execute(
            "select count(*) from duckdb_tables() where database_name = ? and table_name = ?",
            [LAKE, name],
        ).fetchone()[0]
    )


def detach(con: duckdb.DuckDBPyConnection) -> None:
    """Detach the catalog; the connection's tables in memory stay."""
    con.execute("use memory")
    con.execute(f"detach {LAKE}")


def next_version(con: duckdb.DuckDBPyConnection) -> int:
    return con.execute(f"select max(snapshot_id) + 1 from {LAKE}.snapshots()").fetchone()[0]


def start_writing(con: duckdb.DuckDBPyConnection, settings: Settings) -> None:
    """Before this writer (which holds the run lock) writes data files: the data path must
    be the catalog's own, and the files a writer of it killed before its commit left,
    which no snapshot records, are deleted (`data_path`)."""
    data_path.claim(con, LAKE, settings, catalog_name(settings))
    if removed := data_path.begin_writing(con, LAKE, settings):
        logging.getLogger("paperlake").info(
            "deleted %d data files a run killed before its commit left", removed
        )
