"""DuckDB connections with the packaged extensions, and the DuckLake catalog they attach."""

from __future__ import annotations

import fcntl
import importlib
import logging
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from flows.settings import SQL_DIR, Settings

EXTENSIONS = ("ducklake", "vss", "fts")
LAKE = "lake"


ATTACH_WAIT_SECONDS = 60


class WarehouseError(RuntimeError):
    """The warehouse is missing or holds no published version."""


class WarehouseBusy(WarehouseError):
    """Another run holds the warehouse."""


def extension_file(name: str) -> Path:
    """Path of the .duckdb_extension file shipped by the duckdb-extension-<name> package."""
    package = importlib.import_module(f"duckdb_extension_{name}")
    root = Path(package.__file__).parent / "extensions" / f"v{duckdb.__version__}"
    path = root / f"{name}.duckdb_extension"
    if not path.exists():
        raise RuntimeError(
            f"{path} is missing: duckdb-extension-{name} must match duckdb {duckdb.__version__}"
        )
    return path


def connect(database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with ducklake, vss and fts loaded from installed packages.

    DuckDB cannot download extensions here, so each is installed from its wheel's file.
    """
    # No progress bar: its callback into Python can swallow the exception a stop signal
    # raises during a long query, so SIGTERM or Ctrl-C would wait for the query to end.
    con = duckdb.connect(database)
    con.execute("set enable_progress_bar = false")
    for name in EXTENSIONS:
        try:
            con.execute(f"LOAD {name}")
        except duckdb.Error:
            con.execute(f"INSTALL '{extension_file(name)}'")
            con.execute(f"LOAD {name}")
    return con


def attach(
    con: duckdb.DuckDBPyConnection,
    settings: Settings,
    version: int | None = None,
    create: bool = False,
    read_only: bool = False,
) -> None:
    """Attach the warehouse's DuckLake catalog as `lake` and make it the default schema.

    The catalog is a DuckDB file that one process at a time may hold for writing, so a
    busy catalog is retried for up to ATTACH_WAIT_SECONDS.

    Args:
        version: attach at this snapshot (time travel); None for the latest.
        create: create the catalog when it does not exist yet.
        read_only: attach for reading only, as queries do.
    """
    catalog = settings.catalog_path
    if not catalog.exists() and not create:
        raise WarehouseError(f"no warehouse at {settings.warehouse}: run `paperlake run` first")
    data_path = Path(settings.data_location)
    data_path.mkdir(parents=True, exist_ok=True)
    # Data files are recorded relative to the data path, and the data path is always given
    # resolved and as an override: a warehouse opens the same under any spelling of its
    # path, from any working directory, and after it is copied or moved.
    options = [
        f"DATA_PATH '{data_path.resolve()}/'",
        "OVERRIDE_DATA_PATH true",
        "DATA_INLINING_ROW_LIMIT 0",
    ]
    if version is not None:
        options.append(f"SNAPSHOT_VERSION {int(version)}")
    if read_only:
        options.append("READ_ONLY")
    deadline = time.monotonic() + ATTACH_WAIT_SECONDS
    waiting = False
    while True:
        try:
            con.execute(f"ATTACH 'ducklake:{catalog}' AS {LAKE} ({', '.join(options)})")
            break
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise WarehouseBusy(
                    f"catalog {catalog} is still in use after {ATTACH_WAIT_SECONDS} s "
                    f"(close the other process, e.g. an open Python session): {exc}"
                ) from None
            if not waiting:  # say once who holds it (DuckDB's message names the process)
                logging.getLogger("paperlake").warning(
                    "waiting up to %d s for catalog %s: %s", ATTACH_WAIT_SECONDS, catalog, exc
                )
                waiting = True
            time.sleep(0.5)
    con.execute(f"USE {LAKE}")


def open_lake(settings: Settings, version: int | None = None) -> duckdb.DuckDBPyConnection:
    """A connection with the catalog attached, at `version` or the latest."""
    con = connect()
    try:
        attach(con, settings, read_only=True)
        versions = published_versions(con)
        if not versions:
            raise WarehouseError(f"{settings.warehouse} holds no published version yet")
        if version is not None:
            if version not in versions:
                raise WarehouseError(
                    f"version {version} is not a published version (published: "
                    f"{', '.join(map(str, versions))})"
                )
            con.execute("use memory")
            con.execute(f"detach {LAKE}")
            attach(con, settings, version=version, read_only=True)
    except BaseException:
        con.close()
        raise
    return con


# What `paperlake query` runs: statements that only read. Everything else (ATTACH, DETACH,
# USE and other SET, COPY, EXPORT, INSTALL and LOAD, CALL, CREATE, INSERT, UPDATE, DELETE,
# DROP, ALTER, PRAGMA that writes, ...) is refused before anything runs.
READ_STATEMENTS = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
# Table functions of DuckLake that change the catalog or its files, refused inside a SELECT.
MAINTENANCE_FUNCTIONS = re.compile(
    r"\bducklake_(?:expire_snapshots|cleanup_old_files|cleanup|merge_adjacent_files|"
    r"rewrite_data_files|add_data_files|flush_inlined_data|set_option|set_commit_message)\b",
    re.IGNORECASE,
)


class QueryRefused(WarehouseError):
    """A query that would do more than read the warehouse."""


def read_only_query(sql: str) -> str:
    """`sql`, checked by DuckDB's own parser to hold only statements that read.

    Raises:
        QueryRefused: naming the first statement type (or function) that is not allowed.
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
                f"refused a {kind} statement: `paperlake query` only reads "
                f"(SELECT, WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN)"
            )
        if found := MAINTENANCE_FUNCTIONS.search(statement.query):
            raise QueryRefused(f"refused {found.group(0)}: `paperlake query` only reads")
    return sql


def read_sql(name: str) -> str:
    """The text of sql/<name>.sql."""
    return (SQL_DIR / f"{name}.sql").read_text()


def published_versions(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Snapshot ids that paperlake committed (each run's commit carries a message)."""
    rows = con.execute(
        f"select snapshot_id from {LAKE}.snapshots() where commit_message is not null order by 1"
    ).fetchall()
    return [r[0] for r in rows]


@contextmanager
def run_lock(settings: Settings) -> Iterator[None]:
    """Hold the warehouse for one run; a second run at once exits with a clear message.

    The lock is an flock on warehouse/.lock, released by the kernel however the holder ends
    (SIGKILL included), so a crashed run never leaves the warehouse locked.
    """
    settings.warehouse.mkdir(parents=True, exist_ok=True)
    path = settings.warehouse / ".lock"
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise WarehouseBusy(
            f"warehouse {settings.warehouse} is busy: a run is in progress ({holder}); "
            "try again when it ends"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} since {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC")
    handle.flush()
    try:
        yield
    finally:
        handle.seek(0)
        handle.truncate()
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
