"""The run lock: one run at a time per warehouse, across processes and hosts."""

from __future__ import annotations

import fcntl
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime

from flows.core.lake import catalog_name, holder_description, postgres, postgres_conninfo, read_sql
from flows.core.run_record import run_logger
from flows.core.settings import Settings

# How often a run waiting for the warehouse lock, and so for a stop signal, looks again.
LOCK_POLL_SECONDS = 0.5


def utc_text(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


@contextmanager
def run_lock(settings: Settings) -> Iterator[None]:
    """Hold the warehouse for one run; a run started meanwhile waits, saying once for whom.

    The waiting run then finds the version the holder published, and so is up to date. The
    lock is released however the holder ends (SIGKILL included): an flock on
    warehouse/.lock, or with a PostgreSQL catalog an advisory lock of the catalog's database,
    so that runs from different hosts exclude each other. Every deleting or merging
    transaction runs under it: concurrent DuckLake deletes in one data file can both commit.
    """
    lock = postgres_lock if postgres_conninfo(settings) else file_lock
    with lock(settings):
        yield


def say_waiting(settings: Settings, holder: str) -> None:
    """Log once that this run waits, and for whom."""

    run_logger().warning("waiting for the run holding %s: %s", catalog_name(settings), holder)


@contextmanager
def file_lock(settings: Settings) -> Iterator[None]:
    """The flock on warehouse/.lock, which holds a line naming its holder."""
    settings.warehouse.mkdir(parents=True, exist_ok=True)
    with (settings.warehouse / ".lock").open("a+") as handle:
        waiting = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not waiting:
                    handle.seek(0)
                    say_waiting(settings, handle.read().strip() or "another process")
                    waiting = True
                time.sleep(LOCK_POLL_SECONDS)  # polled: a stop signal ends the wait at once
        handle.seek(0)
        handle.truncate()
        handle.write(f"{holder_description()} since {utc_text(datetime.now(UTC))}")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)


def lock_key(database: str) -> tuple[int, int]:
    """The advisory lock of the catalog in `database`: paperlake's class, the database's id."""
    return zlib.crc32(b"paperlake run lock") >> 1, zlib.crc32(database.encode()) >> 1


@contextmanager
def postgres_lock(settings: Settings) -> Iterator[None]:
    """A session advisory lock on a connection held for the whole run.

    The server releases it when the connection ends, however the process ends. The
    connection's application_name names the holder, which a waiting run reads back.
    """
    import psycopg

    with postgres(settings) as pg:
        key = lock_key(pg.execute("select current_database()").fetchone()[0])
        waiting = False
        while not pg.execute("select pg_try_advisory_lock(%s, %s)", key).fetchone()[0]:
            if not waiting:
                holder = pg.execute(read_sql("postgres/run_lock_holder"), key).fetchone()
                name, since = holder if holder else (None, None)
                since_text = f" since {utc_text(since)}" if since else ""
                say_waiting(settings, (name or "another process") + since_text)
                waiting = True
            time.sleep(LOCK_POLL_SECONDS)  # polled: a stop signal ends the wait at once
        try:
            yield
        finally:
            with suppress(psycopg.Error):  # a lost session has released the lock already
                pg.execute("select pg_advisory_unlock(%s, %s)", key)
