"""Committing a publish: the planned changes and the history tables applied to the catalog
as one DuckLake snapshot, in one transaction."""

from __future__ import annotations

import contextlib
import json
import os
import signal

import duckdb
import polars as pl

from flows.core import data_path
from flows.core.lake import LAKE, STAGE, bounded, staged
from flows.core.settings import Settings
from flows.publish.plan import HASHED_PLAN_ROWS, Fill, as_held, prepare, row_hashes
from flows.publish.published import PublishedDigests, PublishedRows, table_digest
from flows.publish.stage import (
    HISTORY_TABLES,
    TABLE_KEYS,
    detach,
    next_version,
    table_exists,
)

# Crash drills: PAPERLAKE_FAULT=<point> kills the process with SIGKILL at that point, so
# that tests can show a run killed mid-publish leaves the catalog at the previous version.
FAULT_POINTS = ("before_publish", "mid_publish", "before_commit")
# What DuckDB may hold of the tables a publish stages; the rest spills to disk.
PUBLISH_MEMORY = "2GB"


def fault_point(name: str) -> None:
    """Die here, by SIGKILL, when PAPERLAKE_FAULT names this point."""
    if os.environ.get("PAPERLAKE_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def planned_counts(
    con: duckdb.DuckDBPyConnection, plans: dict[str, str]
) -> dict[str, tuple[int, int]]:
    """Rows each plan deletes and inserts (a replace: none, and the staged rows), counted
    in one query."""
    parts = [
        f"select '{name}', 0, (select count(*) from {STAGE}.{name})"
        if mode == "replace"
        else f"select '{name}', (select count(*) from {STAGE}.{name}__removed), "
        f"(select count(*) from {STAGE}.{name}__added)"
        for name, mode in plans.items()
        if mode != "same"
    ]
    rows = con.execute(" union all ".join(parts)).fetchall() if parts else []
    counts = {name: (0, 0) for name, mode in plans.items() if mode == "same"}
    return counts | {name: (deleted, inserted) for name, deleted, inserted in rows}


def apply_changes(
    con: duckdb.DuckDBPyConnection,
    name: str,
    keys: tuple[str, ...],
    mode: str,
    counts: tuple[int, int] | None = None,
) -> tuple[int, int]:
    """Apply a planned change inside the publish transaction; returns rows deleted, inserted.

    `counts`: the plan's rows deleted and inserted (`planned_counts`), when counted already.
    """
    if mode == "same":
        return 0, 0
    deleted, inserted = counts or planned_counts(con, {name: mode})[name]
    target, staged = f"{LAKE}.main.{name}", f"{STAGE}.{name}"
    if mode == "replace":
        con.execute(f"create or replace table {target} as select * from {staged}")
        return deleted, inserted
    removed, added = f"{STAGE}.{name}__removed", f"{STAGE}.{name}__added"
    if deleted:
        match = " and ".join(f"t.{k} is not distinct from r.{k}" for k in keys)
        con.execute(
            f"delete from {target} t where exists (select 1 from {removed} r where {match})"
        )
    if inserted:
        con.execute(f"insert into {target} select * from {added}")
    return deleted, inserted


def append(con: duckdb.DuckDBPyConnection, name: str) -> int:
    target, staged = f"{LAKE}.main.{name}", f"{STAGE}.{name}"
    if not table_exists(con, name):
        con.execute(f"create table {target} as select * from {staged}")
    else:
        # A history table grows new columns over releases; older rows read them as NULL.
        have = {r[0] for r in con.execute(f"describe {target}").fetchall()}
        for column, dtype, *_ in con.execute(f"describe {staged}").fetchall():
            if column not in have:
                con.execute(f'alter table {target} add column "{column}" {dtype}')
        con.execute(f"insert into {target} by name select * from {staged}")
    return con.execute(f"select count(*) from {staged}").fetchone()[0]


def commit(
    con: duckdb.DuckDBPyConnection,
    settings: Settings,
    plans: dict[str, str],
    message: str,
    manifest: dict,
    embedding_dim: int,
    published: tuple[Settings, dict[str, pl.DataFrame]] | None = None,
    digests: tuple[Settings, dict[str, str]] | None = None,
) -> tuple[int, dict[str, tuple[int, int]]]:
    """Apply `plans` (`prepare`) and append the history tables as one snapshot; detach.

    Call it under locks.run_lock: DuckLake's deletes from one data file by two concurrent
    transactions can both commit and corrupt a table, so merges must never overlap.

    Args:
        con: the run's staging connection, its tables in memory.main, the catalog attached
            by `prepare`.
        settings: the run's settings (its data path).
        message: the snapshot's commit message.
        manifest: the run manifest, stored as the commit's extra info.
        embedding_dim: the dimension of the `embedding_vectors` view's fixed-size arrays.
        published: the settings and the keyed tables' `row_hashes`, kept for the next
            run's plan (`PublishedRows`) once the snapshot is committed.
        digests: the settings and the keyed tables' `table_digest`, kept for the next
            run's plan (`PublishedDigests`) once the snapshot is committed.

    Returns:
        the new version and, per table, rows deleted and inserted.
    """
    changes: dict[str, tuple[int, int]] = {}
    in_transaction = False
    try:
        version = next_version(con)
        con.execute(f"update {STAGE}.runs set snapshot_id = ?", [version])
        counts = planned_counts(con, plans)
        fault_point("before_publish")
        con.execute("begin transaction")
        in_transaction = True
        for name, keys in TABLE_KEYS.items():
            changes[name] = apply_changes(con, name, keys, plans[name], counts[name])
            if name == "embeddings":
                fault_point("mid_publish")
        for name in HISTORY_TABLES:
            changes[name] = (0, append(con, name))
        # DuckLake stores lists, not fixed-size arrays; this view gives vss functions FLOAT[dim].
        con.execute(
            f"create or replace view {LAKE}.main.embedding_vectors as "
            f"select paper_id, model, embedding::FLOAT[{int(embedding_dim)}] as embedding "
            f"from {LAKE}.main.embeddings"
        )
        con.execute(
            f"call {LAKE}.set_commit_message('paperlake', ?, extra_info => ?)",
            [message, json.dumps(manifest, sort_keys=True, default=str)],
        )
        fault_point("before_commit")
        con.execute("commit")
        in_transaction = False
        data_path.end_writing(con, LAKE, settings)
        if published is not None:
            PublishedRows(published[0]).save(con, published[1])
        if digests is not None:
            PublishedDigests(digests[0]).save(con, digests[1])
    except BaseException:
        if in_transaction:
            con.execute("rollback")
            with contextlib.suppress(OSError, duckdb.Error):  # else the next run deletes them
                data_path.end_writing(con, LAKE, settings, failed=True)  # what it wrote
        raise
    finally:
        detach(con)
    return version, changes


def publish(
    con: duckdb.DuckDBPyConnection,
    settings: Settings,
    message: str,
    manifest: dict,
    embedding_dim: int,
) -> tuple[int, dict[str, tuple[int, int]]]:
    """Commit the staged tables to the catalog as one snapshot: `prepare`, then `commit`."""
    return commit(con, settings, prepare(con, settings), message, manifest, embedding_dim)


def publish_tables(
    tables: dict[str, pl.DataFrame],
    settings: Settings,
    message: str,
    manifest: dict,
    embedding_dim: int,
    fill: Fill | None = None,
) -> tuple[int, dict[str, tuple[int, int]]]:
    """Plan and commit a run's tables as one snapshot: the new version and, per table, rows
    deleted and inserted.

    Large keyed tables are planned from their row hashes against those the last commit
    kept (`PublishedRows`), small ones compared whole, skipping those whose digest the last
    commit kept (`PublishedDigests`); either is kept for the next run's plan.

    `fill` gives rows as published from rows as the run holds them (the papers' raw and
    clean abstracts from their hashes: flows/core/held.py): large tables are hashed as held
    and filled where rows are staged, small ones filled first.
    """
    frames = {name: tables[name] for name in TABLE_KEYS}
    fill = fill or as_held
    hashes = digests = None
    if sum(frame.height for frame in frames.values()) >= HASHED_PLAN_ROWS:
        hashes = {name: row_hashes(frames[name], keys) for name, keys in TABLE_KEYS.items()}
    else:
        frames = {name: fill(frame) for name, frame in frames.items()}
        digests = {name: table_digest(frame) for name, frame in frames.items()}
    history = {name: tables[name] for name in HISTORY_TABLES}
    con = staged(history, bounded(settings.cache_path / "spill", PUBLISH_MEMORY))
    try:
        plans = prepare(con, settings, frames, hashes, digests, fill)
        kept_rows = (settings, hashes) if hashes is not None else None
        kept_digests = (settings, digests) if digests is not None else None
        return commit(
            con, settings, plans, message, manifest, embedding_dim, kept_rows, kept_digests
        )
    finally:
        con.close()
