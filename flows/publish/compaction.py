"""Compaction: each table's small files merged and its delete files applied, every
version kept readable as it was."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import duckdb

from flows.core import cache, data_path
from flows.core.lake import (
    LAKE,
    attach,
    catalog_exists,
    catalog_name,
    connect,
    no_warehouse,
    published_versions,
)
from flows.core.locks import run_lock
from flows.core.settings import Settings
from flows.publish.published import PublishedDigests, PublishedRows
from flows.publish.stage import lake_tables, start_writing


@dataclass
class Compaction:
    """What `compact` did: each table's live files (data and delete files) before and
    after, and the files no version needs any more that it removed from disk."""

    version: int | None
    files_before: dict[str, int]
    files_after: dict[str, int]
    removed: int


def live_files(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Each published table's data and delete files at the latest snapshot of the catalog
    attached on `con`: what reading the table opens."""
    counts = {}
    for name in sorted(lake_tables(con)):
        counts[name] = con.execute(
            f"select count(*) + count(delete_file) from ducklake_list_files('{LAKE}', ?)", [name]
        ).fetchone()[0]
    return counts


def compact(settings: Settings, remove_files: bool = True) -> Compaction:
    """Merge each table's small files (one or more a run) and apply its delete files, so
    that reading a table opens a few files however many versions the warehouse holds.

    DuckLake's maintenance functions keep every version readable as it was: merged files
    carry the snapshots their rows belong to. Their commits add catalog snapshots without
    a message, which are not versions: the next version's number skips them. The row
    hashes and digests kept for the next run's plan (`PublishedRows`, `PublishedDigests`)
    stay valid, since no row changes, and are stamped with the new snapshot. Runs under the
    run lock.

    Args:
        remove_files: delete the files no snapshot reads any more (a reader that started
            before the compaction may still be scanning them); else a later compaction
            removes them.
    """
    if not catalog_exists(settings):  # checked first: the lock would make the folder
        raise no_warehouse(settings)
    with run_lock(settings):
        return compact_locked(settings, 0 if remove_files else None)


COMPACTED = "compacted.json"  # in the published cache: the version of the last compaction


def compact_locked(settings: Settings, remove_after: int | None) -> Compaction:
    """`compact`, for a caller that holds the run lock.

    Args:
        remove_after: remove the files no snapshot reads that were left this many seconds
            ago or earlier (0: all of them); None: none.
    """
    con = connect(extensions=())
    try:
        attach(con, settings)
        start_writing(con, settings)
        rows, digests = PublishedRows(settings), PublishedDigests(settings)
        stamp = rows.stamp(con)
        before = live_files(con)
        try:
            con.execute(f"call ducklake_merge_adjacent_files('{LAKE}')")
            con.execute(f"call ducklake_rewrite_data_files('{LAKE}', delete_threshold => 0)")
            con.execute(f"call ducklake_merge_adjacent_files('{LAKE}')")  # the rewritten files
        except BaseException:
            with contextlib.suppress(OSError, duckdb.Error):
                data_path.end_writing(con, LAKE, settings, failed=True)
            raise
        data_path.end_writing(con, LAKE, settings)
        after = live_files(con)
        removed = 0
        if remove_after is not None:
            since = f"older_than => now() - to_seconds({int(remove_after)})"
            removed = len(
                con.execute(
                    f"call ducklake_cleanup_old_files('{LAKE}', "
                    f"{'cleanup_all => true' if remove_after == 0 else since})"
                ).fetchall()
            )
        rows.restamp(con, stamp)
        digests.restamp(con, stamp)
        version = max(published_versions(con), default=None)
    finally:
        con.close()
    with contextlib.suppress(OSError):  # a record not kept: the next run compacts again
        record = {"catalog": catalog_name(settings), "version": version}
        cache.write_record(rows.folder / COMPACTED, record)
    return Compaction(version, before, after, removed)


# Files a run's automatic compaction leaves on disk: those left this recently, which a
# query that began before it may still be reading; the next compaction removes them.
KEEP_LEFT_FILES_SECONDS = 3600


def compact_when_due(settings: Settings, version: int) -> Compaction | None:
    """Compact (`compact_locked`) once `settings.compact_every` versions were published
    since the last compaction (or since the first version); the caller holds the run lock
    and has just published `version`."""
    if settings.compact_every <= 0:
        return None
    last = 0
    with contextlib.suppress(OSError, cache.Damaged, TypeError, KeyError):
        kept = cache.read_record(PublishedRows(settings).folder / COMPACTED)
        if kept["catalog"] == catalog_name(settings):
            last = int(kept["version"] or 0)
    if version - last < settings.compact_every:
        return None
    return compact_locked(settings, KEEP_LEFT_FILES_SECONDS)
