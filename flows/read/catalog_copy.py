"""A long-lived reader's own copy of a DuckDB-file catalog (`paperlake explore`, `paperlake.open`).

DuckDB lets a process write a database file only while no other process has it open, so
a reader that kept WAREHOUSE/catalog.ducklake attached made every run wait at publish,
then fail after 60 s. A long-lived reader attaches a copy instead, taken while it holds
DuckDB's own lock on the catalog (a read-only connection to it): no commit can be under
way, so the copy is never torn. A copy is taken anew at the next request once the
catalog's identity, size or modification time (or its write-ahead log's) changed; while a
run holds the catalog, the last copy goes on serving. The data files are the warehouse's:
the copy is attached with the warehouse's data path, and a data file is never rewritten
(`compact` removes only files that no version still reads).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path

import duckdb
from pydantic import Field

from flows.core.errors import WarehouseBusy, WarehouseError
from flows.core.lake import ATTACH_WAIT_SECONDS, no_warehouse
from flows.core.locks import LOCK_POLL_SECONDS
from flows.core.settings import Settings
from flows.publish import catalog_stamp

# What DuckDB says when another process holds the file for writing.
HELD = "Conflicting lock"


class CopySettings(Settings):
    """A warehouse's settings with a copy of its catalog attached in its place; the
    warehouse, its data path and the folder messages name stay the warehouse's."""

    catalog_copy: Path = Field(
        Path(), description="The catalog file attached instead of the warehouse's."
    )

    @property
    def catalog_path(self) -> Path:
        return self.catalog_copy


class CatalogCopy:
    """The latest copy of `settings`' catalog (`reading`: the settings that attach it)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.folder = tempfile.TemporaryDirectory(prefix="paperlake-catalog-")
        self.stamp: tuple | None = None
        self.reading: CopySettings | None = None
        self.taken = 0
        self.held_at = -LOCK_POLL_SECONDS  # when a try last found the catalog held

    def take(self, wait: float = 0.0) -> bool:
        """Copy the catalog where it changed since the last copy; whether a copy was taken.

        A run may hold the catalog: it is waited for up to `wait` seconds; with no wait
        the last copy stays, and the next try waits LOCK_POLL_SECONDS (a failed try costs
        a request milliseconds).

        Raises:
            WarehouseError: there is no catalog, or it cannot be opened.
            WarehouseBusy: the catalog was still held after `wait` seconds (or held with
                no copy taken yet).
        """
        if self.reading is not None:
            if not wait and time.monotonic() - self.held_at < LOCK_POLL_SECONDS:
                return False
            if catalog_stamp(self.settings) == self.stamp:
                return False
        deadline = time.monotonic() + wait
        said = False
        while True:
            try:
                self.copy()
                return True
            except duckdb.IOException as exc:
                catalog = self.settings.catalog_path
                if HELD not in str(exc):
                    raise WarehouseError(f"cannot open catalog {catalog}: {exc}") from None
                if not wait and self.reading is not None:
                    self.held_at = time.monotonic()
                    return False
                if time.monotonic() > deadline:
                    raise WarehouseBusy(
                        f"catalog {catalog} is still in use after {wait:.0f} s: {exc}"
                    ) from None
                if not said:
                    logging.getLogger("paperlake").warning(
                        "waiting up to %.0f s for catalog %s: %s", wait, catalog, exc
                    )
                    said = True
                time.sleep(LOCK_POLL_SECONDS)

    def copy(self) -> None:
        """Copy the catalog (and a write-ahead log left by a process that did not end
        cleanly) while a read-only connection holds DuckDB's lock on it."""
        source = self.settings.catalog_path
        if not source.exists():
            raise no_warehouse(self.settings)
        target = Path(self.folder.name) / str(self.taken + 1) / source.name
        target.parent.mkdir()
        try:
            with duckdb.connect(str(source), read_only=True):
                stamp = catalog_stamp(self.settings)
                wal = Path(f"{source}.wal")
                if wal.exists():
                    shutil.copyfile(wal, f"{target}.wal")
                # The catalog last: closing a file lets go of this process's locks on it.
                shutil.copyfile(source, target)
        except BaseException:
            shutil.rmtree(target.parent)
            raise
        self.taken += 1
        self.stamp = stamp
        self.reading = CopySettings(**dict(self.settings), catalog_copy=target)

    def prune(self) -> None:
        """Remove every copy but the latest (call once nothing reads them)."""
        for folder in Path(self.folder.name).iterdir():
            if folder.name != str(self.taken):
                shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        self.folder.cleanup()


def reader_of(settings: Settings) -> CatalogCopy | None:
    """A copy of `settings`' catalog for a long-lived reader; None for a PostgreSQL
    catalog, which nobody waits for."""
    if settings.catalog:
        return None
    found = CatalogCopy(settings)
    try:
        found.take(wait=ATTACH_WAIT_SECONDS)
    except BaseException:
        found.close()
        raise
    return found
