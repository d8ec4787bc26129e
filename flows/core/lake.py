"""DuckDB connections with the packaged extensions, and the DuckLake catalog they attach."""

from __future__ import annotations

import importlib
import logging
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import duckdb

from flows.core import damage, data_path
from flows.core.errors import CatalogUnreachable, WarehouseBusy, WarehouseError
from flows.core.settings import SQL_DIR, Settings

if TYPE_CHECKING:
    import polars as pl
    import psycopg

EXTENSIONS = ("ducklake", "vss", "fts")
LAKE = "lake"
STAGE = "memory.main"  # a connection's own database, where frames are staged for SQL


ATTACH_WAIT_SECONDS = 60
# DuckLake retries a commit that lost a race for the next snapshot id. With retries off, 21
# of 82 concurrent appends to a PostgreSQL catalog failed; with 10 (DuckLake's default, set
# here so that it never silently changes) all succeeded.
COMMIT_RETRIES = 10


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


def load_extension(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """LOAD `name`, installing it from its package's file the first time."""
    try:
        con.execute(f"LOAD {name}")
    except duckdb.Error:
        con.execute(f"INSTALL '{extension_file(name)}'")
        con.execute(f"LOAD {name}")


def connect(
    database: str = ":memory:", extensions: tuple[str, ...] = EXTENSIONS
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with `extensions` (ducklake, vss and fts) loaded from installed
    packages.

    DuckDB cannot download extensions here, so each is installed from its wheel's file.
    Loading all three takes about half a second per connection: the pipeline's own
    connections load none (`attach` loads ducklake itself), a user's query gets them all.
    """
    # No progress bar: its callback into Python can swallow the exception a stop signal
    # raises during a long query, so SIGTERM or Ctrl-C would wait for the query to end.
    con = duckdb.connect(database)
    con.execute("set enable_progress_bar = false")
    for name in extensions:
        load_extension(con, name)
    return con


def bounded(spill: Path, memory: str) -> duckdb.DuckDBPyConnection:
    """A connection without extensions whose tables and queries hold at most `memory`
    (a DuckDB size, "2GB"): the rest is spilled to the folder `spill`, not held beside
    the run's frames."""
    con = connect(extensions=())
    spill.mkdir(parents=True, exist_ok=True)
    con.execute(f"set temp_directory = '{spill}'")
    con.execute(f"set memory_limit = '{memory}'")
    return con


def postgres_conninfo(settings: Settings) -> str | None:
    """The libpq connection string of a PostgreSQL catalog; None for the DuckDB file.

    Raises:
        WarehouseError: the catalog is neither a postgresql:// URL nor postgres:<conninfo>.
    """
    catalog = settings.catalog
    if not catalog:
        return None
    if catalog.startswith(("postgresql://", "postgres://")):
        return catalog
    if catalog.startswith("postgres:"):
        return catalog.removeprefix("postgres:").strip()
    raise WarehouseError(
        f"catalog {catalog!r} is not supported: give postgresql://USER@HOST:PORT/DB or "
        "postgres:dbname=DB host=HOST (or leave it out for WAREHOUSE/catalog.ducklake)"
    )


def without_password(conninfo: str) -> str:
    """`conninfo` as messages show it: the same spelling with any password left out."""
    if "://" in conninfo:
        parts = urlsplit(conninfo)
        netloc = parts.netloc
        if parts.password is not None:
            host = netloc.rsplit("@", 1)[1]
            netloc = f"{parts.username}@{host}" if parts.username else host
        query = "&".join(q for q in parts.query.split("&") if not q.startswith("password="))
        return urlunsplit(parts._replace(netloc=netloc, query=query))
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(conninfo)
    params.pop("password", None)
    return make_conninfo(**params)


def catalog_name(settings: Settings) -> str:
    """The catalog as messages name it: its file, or its PostgreSQL URL without password."""
    conninfo = postgres_conninfo(settings)
    return without_password(conninfo) if conninfo else str(settings.catalog_path)


def is_url(location: str) -> bool:
    """True for a data path on object storage (s3://...), which is used as given."""
    return "://" in location


def postgres(settings: Settings) -> psycopg.Connection:
    """An autocommit connection to the catalog's PostgreSQL database.

    Raises:
        CatalogUnreachable: in one line, naming the catalog without its password.
    """
    import psycopg

    conninfo = postgres_conninfo(settings)
    try:
        return psycopg.connect(
            conninfo, autocommit=True, connect_timeout=10, application_name=holder_description()
        )
    except psycopg.Error as exc:
        reason = " ".join(str(exc).splitlines()[0].removeprefix("connection failed: ").split())
        raise CatalogUnreachable(
            f"cannot open the catalog {catalog_name(settings)}: {reason}"
        ) from None


def catalog_exists(settings: Settings) -> bool:
    """True once the warehouse has a catalog: its file, or DuckLake's tables in PostgreSQL.

    A PostgreSQL database that holds no DuckLake tables yet is no warehouse yet.
    """
    if postgres_conninfo(settings) is None:
        return settings.catalog_path.exists()
    with postgres(settings) as pg:
        return pg.execute("select to_regclass('ducklake_snapshot') is not null").fetchone()[0]


def attach_statement(
    target: str,
    data_path: str | None,
    version: int | None = None,
    read_only: bool = False,
) -> str:
    """The ATTACH of DuckLake catalog `target` as `lake` (pure, so that tests read it).

    Args:
        target: the catalog after `ducklake:`, a file or postgres:<conninfo>.
        data_path: the data files' folder or URL, given as an override; None: the one the
            catalog recorded when it was made.
    """
    options = []
    if data_path is not None:
        options += [f"DATA_PATH '{data_path.rstrip('/')}/'", "OVERRIDE_DATA_PATH true"]
    options.append("DATA_INLINING_ROW_LIMIT 0")
    if version is not None:
        options.append(f"SNAPSHOT_VERSION {int(version)}")
    if read_only:
        options.append("READ_ONLY")
    return f"ATTACH 'ducklake:{target}' AS {LAKE} ({', '.join(options)})"


def data_path_option(settings: Settings, exists: bool) -> str | None:
    """The DATA_PATH an attach gives, or None to use the one the catalog recorded.

    Data files are recorded relative to the data path, and a local data path is given
    resolved and as an override: a warehouse opens the same under any spelling of its path,
    from any working directory, and after it is copied or moved. A shared PostgreSQL
    catalog keeps the data path it was made with unless one is given, so other machines
    need only the catalog's URL. A URL (s3://...) is given as it is.
    """
    shared = postgres_conninfo(settings) is not None
    if shared and exists and not settings.data_path:
        return None
    location = settings.data_location
    if is_url(location):
        return location
    path = Path(location)
    path.mkdir(parents=True, exist_ok=True)
    return str(path.resolve())


def needed_extensions(settings: Settings) -> tuple[str, ...]:
    """Extensions an attach needs: ducklake; postgres, httpfs for s3:// data."""
    needed = ("ducklake",) + (("postgres",) if postgres_conninfo(settings) else ())
    return needed + (("httpfs",) if is_url(settings.data_location) else ())


def no_warehouse(settings: Settings) -> WarehouseError:
    """The error of a command that needs a warehouse where there is none yet, or whose
    catalog was lost while its data files are left (`data_path.refuse_foreign_files`)."""
    try:
        data_path.refuse_foreign_files(settings, catalog_name(settings))
    except WarehouseError as exc:
        return exc
    where = catalog_name(settings) if settings.catalog else settings.warehouse
    return WarehouseError(f"no warehouse at {where}: run `paperlake run` first")


def attach(
    con: duckdb.DuckDBPyConnection,
    settings: Settings,
    version: int | None = None,
    create: bool = False,
    read_only: bool = False,
) -> None:
    """Attach the warehouse's DuckLake catalog as `lake` and make it the default schema.

    A DuckDB-file catalog may be held for writing by one process at a time, so a busy one
    is retried for up to ATTACH_WAIT_SECONDS. A PostgreSQL catalog never makes anyone wait:
    readers read a snapshot while a run commits.

    Args:
        version: attach at this snapshot (time travel); None for the latest.
        create: create the catalog when it does not exist yet.
        read_only: attach for reading only, as queries do.
    """
    exists = catalog_exists(settings)
    if not exists and not create:
        raise no_warehouse(settings)
    if not exists:  # a new catalog never starts on another's (or a lost one's) files
        data_path.refuse_foreign_files(settings, catalog_name(settings))
    for name in needed_extensions(settings):
        load_extension(con, name)
    con.execute(f"set ducklake_max_retry_count = {COMMIT_RETRIES}")
    conninfo = postgres_conninfo(settings)
    target = f"postgres:{conninfo}" if conninfo else str(settings.catalog_path)
    statement = attach_statement(target, data_path_option(settings, exists), version, read_only)
    if conninfo:
        try:
            con.execute(statement)
        except duckdb.Error as exc:
            reason = str(exc).replace(conninfo, catalog_name(settings))
            raise CatalogUnreachable(
                f"cannot attach the catalog {catalog_name(settings)}: {reason}"
            ) from None
    else:
        settings.warehouse.mkdir(parents=True, exist_ok=True)
        attach_file(con, statement, settings.catalog_path)
    try:
        if exists:  # its files are read from the data path: they must be its own
            data_path.check_owner(con, LAKE, settings, catalog_name(settings))
        con.execute(f"USE {LAKE}")
    except duckdb.Error as exc:  # the catalog's tables read when first used
        raise damage.told(exc, catalog_name(settings)) or exc from None


def attach_file(con: duckdb.DuckDBPyConnection, statement: str, catalog: Path) -> None:
    """Run `statement` on a DuckDB-file catalog, retrying while another process holds it."""
    deadline = time.monotonic() + ATTACH_WAIT_SECONDS
    waiting = False
    while True:
        try:
            con.execute(statement)
            return
        except duckdb.Error as exc:
            if not damage.is_lock(exc):
                told = damage.told(exc, str(catalog))
                raise told or WarehouseError(f"cannot open catalog {catalog}: {exc}") from None
            if time.monotonic() > deadline:
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


def open_lake(
    settings: Settings, version: int | None = None, extensions: tuple[str, ...] = EXTENSIONS
) -> duckdb.DuckDBPyConnection:
    """A connection with the catalog attached, at `version` or the latest.

    `extensions`: what the reader needs beyond ducklake (vss and fts for a user's query and
    search; the pages and listings paperlake writes itself need none).
    """
    con = connect(extensions=extensions)
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


def read_sql(name: str) -> str:
    """The text of sql/<name>.sql."""
    return (SQL_DIR / f"{name}.sql").read_text()


def stage_frames(con: duckdb.DuckDBPyConnection, frames: dict[str, pl.DataFrame]) -> None:
    """Create memory.main.<name> from each frame, in one script."""
    for name, frame in frames.items():
        con.register(f"{name}_frame", frame)
    if frames:
        con.execute(
            ";\n".join(
                f"create or replace table {STAGE}.{name} as select * from {name}_frame"
                for name in frames
            )
        )
    for name in frames:
        con.unregister(f"{name}_frame")


def staged(
    tables: dict[str, pl.DataFrame], con: duckdb.DuckDBPyConnection | None = None
) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB with no extensions (or `con`) with `tables` staged in it."""
    con = con or connect(extensions=())
    stage_frames(con, tables)
    return con


def define_paper_title(con: duckdb.DuckDBPyConnection) -> None:
    """Give the connection the macros of sql/macros/paper_title.sql: paper_title(title,
    abstract) names a paper to a person (its title, else its abstract's first words) and
    paper_untitled(title) says which; every listing of papers uses them."""
    con.execute(read_sql("macros/paper_title"))


def published_versions(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Snapshot ids that paperlake committed (each run's commit carries a message)."""
    rows = con.execute(
        f"select snapshot_id from {LAKE}.snapshots() where commit_message is not null order by 1"
    ).fetchall()
    return [r[0] for r in rows]


def holder_description() -> str:
    """Who this process is, as a waiting run names the holder: pid, host."""
    return f"pid {os.getpid()} on host {socket.gethostname()}"
