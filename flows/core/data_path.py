"""The data files a catalog owns.

A DuckLake catalog records its data files relative to its data path, and cleaning up after
a killed run means deleting the files it does not record. Both are safe only where the
data path holds this catalog's files alone, so: a new catalog is never made on a data path
that holds DuckLake files already (another warehouse's, or those of a catalog that was
lost), a data path names the catalog it belongs to (MARKER), and a writer deletes only the
unrecorded files that a writer of this catalog, killed before its commit, left behind
(WRITING notes when one began).

A data path on object storage (s3://...) is not listed here: no marker, no clean-up.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import duckdb

from flows.core.errors import CatalogLost, DataPathTaken
from flows.core.files import write_atomically
from flows.core.settings import Settings

MARKER = "paperlake-catalog.json"  # whose data files these are
WRITING = "paperlake-writing.json"  # a writer of the catalog began at this time
DATA_FILES = "ducklake-*.parquet"
# Files a killed writer left were written after it began; the slack allows for a file
# system whose clock (NFS) runs a little behind this machine's.
CLOCK_SLACK_SECONDS = 5.0


def local_folder(settings: Settings) -> Path | None:
    """The data path as a local folder; None for object storage."""
    location = settings.data_location
    return None if "://" in location else Path(location).resolve()


def attached_folder(con: duckdb.DuckDBPyConnection, alias: str, settings: Settings) -> Path | None:
    """The local folder of the data files the catalog attached as `alias` reads: the data
    path given, or for a shared catalog given none, the one it recorded; None for object
    storage."""
    if settings.data_path or not settings.catalog:
        return local_folder(settings)
    row = con.execute(
        f"select value from __ducklake_metadata_{alias}.ducklake_metadata where key = 'data_path'"
    ).fetchone()
    return None if row is None or "://" in row[0] else Path(row[0]).resolve()


def data_files(folder: Path) -> list[Path]:
    """The DuckLake data and delete files under `folder`."""
    return sorted(folder.rglob(DATA_FILES)) if folder.is_dir() else []


def read_marker(folder: Path) -> dict | None:
    """The data path's record of its catalog (name, schema_uuid), if it has a readable one."""
    try:
        found = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and "schema_uuid" in found else None


def refuse_foreign_files(settings: Settings, catalog: str) -> None:
    """Before catalog `catalog` is made: refuse where its data path holds DuckLake files.

    Raises:
        CatalogLost: the files are this catalog's own (the warehouse's data folder, or a
            data path whose marker names this catalog): it was lost, and a new one would
            start again at version 1 and delete them.
        DataPathTaken: the files belong to another catalog.
    """
    folder = local_folder(settings)
    if folder is None:
        return
    found = data_files(folder)
    if not found:
        return
    owner = read_marker(folder) or {}
    own_folder = settings.data_path is None and not settings.catalog  # WAREHOUSE/data
    if own_folder or owner.get("catalog") == owner_label(settings, catalog):
        raise CatalogLost(
            f"the catalog {catalog} is missing, but {folder} holds {len(found)} data files "
            f"of its versions: restore the catalog from a backup to read them (`paperlake "
            f"doctor` then checks it); to start a new warehouse, move {folder} away first"
        )
    named = f"{owner['catalog']}, per its {MARKER}" if owner.get("catalog") else "not this one"
    raise DataPathTaken(
        f"data path {folder} already holds {len(found)} DuckLake data files of another "
        f"catalog ({named}): give {catalog} a data path of its own (--data-path or "
        f"PAPERLAKE_DATA_PATH)"
    )


def schema_uuid(con: duckdb.DuckDBPyConnection, alias: str) -> str:
    """The identity of the catalog attached as `alias`: its main schema's uuid, which the
    catalog keeps for its lifetime (a copy of the catalog keeps it too)."""
    row = con.execute(
        f"select schema_uuid from __ducklake_metadata_{alias}.ducklake_schema "
        "where schema_name = 'main' order by begin_snapshot limit 1"
    ).fetchone()
    return str(row[0])


def owner_label(settings: Settings, catalog: str) -> str:
    """How a marker names the catalog: a catalog file by its absolute path."""
    return catalog if settings.catalog else str(settings.catalog_path.resolve())


def check_owner(
    con: duckdb.DuckDBPyConnection, alias: str, settings: Settings, catalog: str
) -> bool:
    """Whether the data path's marker names the catalog attached as `alias` (False: it has
    no marker yet).

    Raises:
        DataPathTaken: the marker names another catalog, whose files these are.
    """
    folder = attached_folder(con, alias, settings)
    marker = read_marker(folder) if folder is not None else None
    if marker is None:
        return False
    if marker["schema_uuid"] != schema_uuid(con, alias):
        raise DataPathTaken(
            f"data path {folder} belongs to the catalog {marker.get('catalog')} (per its "
            f"{MARKER}), not to {owner_label(settings, catalog)}: give the data path of "
            f"this catalog's own files (--data-path or PAPERLAKE_DATA_PATH)"
        )
    return True


def claim(con: duckdb.DuckDBPyConnection, alias: str, settings: Settings, catalog: str) -> None:
    """Before the catalog attached as `alias` writes to its data path: the path's marker
    names it, written where there is none yet (`check_owner` raises where it names
    another)."""
    folder = attached_folder(con, alias, settings)
    if folder is None:
        return
    label = owner_label(settings, catalog)
    owned = check_owner(con, alias, settings, catalog)
    if owned and read_marker(folder).get("catalog") == label:
        return  # else a copy of the catalog writes here now: the marker names it
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / MARKER, {"catalog": label, "schema_uuid": schema_uuid(con, alias)})


def begin_writing(con: duckdb.DuckDBPyConnection, alias: str, settings: Settings) -> int:
    """Before a writer of the catalog attached as `alias` writes data files (under the run
    lock): delete the files a killed writer left, then note when this one began. Returns
    the number of files deleted."""
    folder = attached_folder(con, alias, settings)
    if folder is None:
        return 0
    removed = 0
    began = writer_began(folder)
    if began is not None:
        removed = delete_left_files(con, alias, folder, began)
    folder.mkdir(parents=True, exist_ok=True)
    holder = f"pid {os.getpid()} on host {socket.gethostname()}"
    write_json(folder / WRITING, {"began": time.time(), "holder": holder})
    return removed


def end_writing(
    con: duckdb.DuckDBPyConnection, alias: str, settings: Settings, failed: bool = False
) -> None:
    """After a writer's commit, or after its transaction was rolled back (`failed`: then
    the files it wrote, which no snapshot records, are deleted first)."""
    folder = attached_folder(con, alias, settings)
    if folder is None:
        return
    began = writer_began(folder)
    if failed and began is not None:
        delete_left_files(con, alias, folder, began)
    (folder / WRITING).unlink(missing_ok=True)


def writer_began(folder: Path) -> float | None:
    """When the last writer that has not ended began; None if every writer ended."""
    try:
        return float(json.loads((folder / WRITING).read_text())["began"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0  # a note that cannot be read: every unrecorded file may be a writer's


def unrecorded_files(con: duckdb.DuckDBPyConnection, alias: str) -> list[Path]:
    """Files under the catalog's data path that no snapshot of it records."""
    rows = con.execute(
        f"select path from ducklake_delete_orphaned_files('{alias}', cleanup_all => true, "
        "dry_run => true)"
    ).fetchall()
    return [Path(path) for (path,) in rows]


def delete_left_files(
    con: duckdb.DuckDBPyConnection, alias: str, folder: Path, began: float
) -> int:
    """Delete the files under `folder` no snapshot records that were written since `began`;
    how many. Older unrecorded files are not this writer's: they stay."""
    removed = 0
    for path in unrecorded_files(con, alias):
        try:
            if folder in path.parents and path.stat().st_mtime >= began - CLOCK_SLACK_SECONDS:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


def write_json(path: Path, spec: dict) -> None:
    """`spec` as JSON at `path`, replaced whole."""
    text = json.dumps(spec)
    write_atomically(path, lambda tmp: tmp.write_text(text))
