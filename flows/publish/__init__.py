"""Publish: copy the staged tables into the DuckLake catalog as one snapshot.

Write-audit-publish: the run stages every table in an in-memory DuckDB, the suites check
them, and only then does one transaction apply the changes to the catalog. Each table
changes by key (rows gone are deleted, rows new or changed are inserted), so unchanged
rows keep their data files and DuckLake's change feed shows what really changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from flows.core import cache, data_path
from flows.core.lake import (
    LAKE,
    STAGE,
    attach,
    catalog_exists,
    catalog_name,
    connect,
    no_warehouse,
    published_versions,
    read_sql,
    stage_frames,
)
from flows.core.locks import run_lock
from flows.core.settings import Settings, package_version
from flows.core.tables import history_tables, keyed_tables
from flows.publish.published import PublishedDigests, PublishedRows

# Crash drills: PAPERLAKE_FAULT=<point> kills the process with SIGKILL at that point, so
# that tests can show a run killed mid-publish leaves the catalog at the previous version.
FAULT_POINTS = ("before_publish", "mid_publish", "before_commit")

# Published tables and the columns that identify a row in each (flows/core/tables.py), and the
# tables that keep a row for every run, appended to.
TABLE_KEYS = keyed_tables()
HISTORY_TABLES = tuple(history_tables())


def fault_point(name: str) -> None:
    """Die here, by SIGKILL, when PAPERLAKE_FAULT names this point."""
    if os.environ.get("PAPERLAKE_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def fingerprint(settings: Settings, inputs: dict[str, str], weights_sha256: str) -> str:
    """What a version is built from: input files and hashes, content config, model, code.

    Equal fingerprints mean equal published content, so a run with the fingerprint of the
    latest version has nothing to do.
    """
    from flows.ingest import INGEST_VERSION

    spec = {
        "inputs": sorted(inputs.items()),
        "config": settings.content_config(),
        "weights_sha256": weights_sha256,
        "paperlake": package_version("paperlake"),
        "ingest": INGEST_VERSION,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def current_fingerprint(settings: Settings) -> str:
    """The fingerprint a run would have now, from file hashes and the model's weights."""
    from flows.embed import model_path, weights_sha256
    from flows.ingest import DigestMemo, discover, try_digest

    memo = DigestMemo(settings.cache_path / "parsed")
    inputs = {str(p): try_digest(p, memo)[0] for p in discover(settings.raw)}
    memo.save()
    return fingerprint(settings, inputs, weights_sha256(model_path(settings.model)))


def latest_published(settings: Settings) -> tuple[int, str] | None:
    """The latest version and the fingerprint of the run that published it, if any."""
    if not catalog_exists(settings):
        data_path.refuse_foreign_files(settings, catalog_name(settings))
        return None
    con = connect(extensions=())
    try:
        attach(con, settings, read_only=True)
        if not table_exists(con, "runs"):
            return None
        return con.execute(
            "select snapshot_id, fingerprint from runs order by snapshot_id desc limit 1"
        ).fetchone()
    finally:
        con.close()


@dataclass
class Previous:
    """What a run carries over from the latest version: its number and fingerprint, its
    topics (id -> centroid), the papers they held and each one's topic, and each paper's
    place on the map.

    Per-paper state is held in frames, not Python collections: Prefect walks a task's
    parameters item by item, which took seconds for sets and dicts of 100,000 papers.
    """

    version: int | None = None
    fingerprint: str | None = None
    centroids: dict[int, np.ndarray] = field(default_factory=dict)
    assignments: pl.DataFrame = field(  # each paper's topic (paper_id, topic_id)
        default_factory=lambda: pl.DataFrame(schema={"paper_id": pl.String, "topic_id": pl.Int32})
    )
    coordinates: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(
            schema={"paper_id": pl.String, "x": pl.Float64, "y": pl.Float64}
        )
    )

    @property
    def papers(self) -> pl.Series:
        """The papers the version's topics held."""
        return self.assignments["paper_id"]


# What this process last published, by catalog file: the catalog's stamp (`catalog_stamp`)
# right after, and the version's state. A process that serves many runs (`paperlake serve`)
# takes the state from here while the catalog is as its own commit left it.
_PUBLISHED: dict[Path, tuple[tuple, Previous]] = {}
# The staging connection of this process's last commit, by catalog file, with the catalog's
# stamp once it was kept: its memory holds the keyed tables of that version, and the next
# run's plan compares with them while the catalog is unchanged (`keep_committed`).
_COMMITTED: dict[Path, tuple[tuple, duckdb.DuckDBPyConnection]] = {}


def catalog_stamp(settings: Settings) -> tuple | None:
    """Identity, size and modification time of a DuckDB-file catalog and its write-ahead
    log: any commit, by any process, changes them. None for a PostgreSQL catalog."""
    if settings.catalog:
        return None
    files = (settings.catalog_path, Path(f"{settings.catalog_path}.wal"))
    return tuple(
        (s.st_ino, s.st_size, s.st_mtime_ns) if (s := stat_or_none(f)) else None for f in files
    )


def stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def remember_published(
    settings: Settings, tables: dict[str, pl.DataFrame], version: int, fingerprint: str
) -> None:
    """Keep what version `version` holds, from the tables just published, for the next run
    of this process (`previous_version`)."""
    stamp = catalog_stamp(settings)
    if stamp is None:
        return
    topics = tables["topics"].filter(pl.col("centroid").is_not_null())
    state = Previous(
        version=version,
        fingerprint=fingerprint,
        centroids={
            t: np.asarray(c, dtype=np.float32)
            for t, c in zip(topics["topic_id"].to_list(), topics["centroid"].to_list(), strict=True)
        },
        assignments=tables["paper_topics"].select("paper_id", "topic_id"),
        coordinates=tables["paper_coordinates"].select("paper_id", "x", "y"),
    )
    _PUBLISHED[settings.catalog_path.resolve()] = (stamp, state)


def keep_committed(settings: Settings, con: duckdb.DuckDBPyConnection) -> bool:
    """Keep `con`, a run's staging connection after its commit (no catalog attached), for
    the next run's plan (`take_committed`): each keyed table staged in its memory becomes
    <name>__published, the rest is dropped. Whether it was kept: not for a PostgreSQL
    catalog, which other machines commit to."""
    stamp = catalog_stamp(settings)
    if stamp is None:
        return False
    staged = con.execute("select table_name from duckdb_tables() where database_name = 'memory'")
    names = [name for (name,) in staged.fetchall()]
    drops = [f"drop table {STAGE}.{name}" for name in names if name not in TABLE_KEYS]
    renames = [
        f"alter table {STAGE}.{name} rename to {name}__published"
        for name in names
        if name in TABLE_KEYS
    ]
    if drops or renames:  # drops first: the last run's __published too
        con.execute(";\n".join(drops + renames))
    key = settings.catalog_path.resolve()
    if key in _COMMITTED:
        _COMMITTED.pop(key)[1].close()
    _COMMITTED[key] = (stamp, con)
    return True


def take_committed(settings: Settings) -> duckdb.DuckDBPyConnection | None:
    """The connection `keep_committed` kept for this catalog, while the catalog is as it
    was then; else None (a stale one is closed)."""
    kept = _COMMITTED.pop(settings.catalog_path.resolve(), None)
    if kept is None:
        return None
    if kept[0] == catalog_stamp(settings):
        return kept[1]
    kept[1].close()
    return None


def previous_version(settings: Settings) -> Previous:
    """The latest version's state a run needs: as this process published or last read it,
    while the catalog is unchanged since; else read in one attach of the catalog."""
    if not catalog_exists(settings):
        # A run that would make the catalog stops here, not after its stages.
        data_path.refuse_foreign_files(settings, catalog_name(settings))
        return Previous()
    key, stamp = settings.catalog_path.resolve(), catalog_stamp(settings)
    kept = _PUBLISHED.get(key)
    if kept and kept[0] == stamp:
        return kept[1]
    found = read_previous(settings)
    if stamp is not None:  # taken before the read: a commit since makes it differ
        _PUBLISHED[key] = (stamp, found)
    return found


def read_previous(settings: Settings) -> Previous:
    """The latest version's state a run needs, read in one attach of the catalog."""
    con = connect(extensions=())
    try:
        attach(con, settings, read_only=True)
        names = lake_tables(con)
        found = Previous()
        if "runs" in names:
            found.version, found.fingerprint = con.execute(
                "select snapshot_id, fingerprint from runs order by snapshot_id desc limit 1"
            ).fetchone() or (None, None)
        described = con.execute("describe topics").fetchall() if "topics" in names else []
        if "centroid" in {r[0] for r in described}:
            rows = con.execute("select topic_id, centroid from topics where centroid is not null")
            found.centroids = {t: np.asarray(c, dtype=np.float32) for t, c in rows.fetchall()}
            found.assignments = con.execute("select paper_id, topic_id from paper_topics").pl()
        if "paper_coordinates" in names:
            found.coordinates = con.execute("select paper_id, x, y from paper_coordinates").pl()
        return found
    finally:
        con.close()


def up_to_date(settings: Settings) -> int | None:
    """The latest version if it was built from exactly the current inputs and config."""
    latest = latest_published(settings)
    if latest is None:
        return None
    return latest[0] if latest[1] == current_fingerprint(settings) else None


def lake_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The tables of the attached catalog."""
    rows = con.execute("select table_name from duckdb_tables() where database_name = ?", [LAKE])
    return {r[0] for r in rows.fetchall()}


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


def table_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(
        con.execute(
            "select count(*) from duckdb_tables() where database_name = ? and table_name = ?",
            [LAKE, name],
        ).fetchone()[0]
    )


def row_hash(columns: list[tuple[str, str]]) -> str:
    """A 64-bit hash of every column of a row of <name>, as SQL.

    DuckDB's hash() does not tell an empty list from NULL or from [NULL], nor an element
    moved between neighbouring lists, nor a NULL struct from one of NULL fields: each list
    adds its length and each struct its text, so that only chance collisions remain.
    """
    parts = []
    for column, dtype in columns:
        quoted = f'"{column}"'
        parts.append(quoted)
        if dtype.endswith("[]"):
            parts.append(f"len({quoted})")
        if "STRUCT" in dtype:
            parts.append(f"{quoted}::varchar")
    return f"hash({', '.join(parts)})"


def plan_changes(
    con: duckdb.DuckDBPyConnection,
    name: str,
    keys: tuple[str, ...],
    columns: tuple[Columns, Columns] | None = None,
) -> str:
    """Stage what turns lake.<name> into the staged table: `replace` or `merge`.

    For a merge, memory holds <name>__removed (keys of rows gone or changed) and
    <name>__added (rows new or changed). Planning reads the lake and writes memory only,
    because one DuckDB transaction may write to one database.

    Rows are compared by key and a 64-bit hash of the whole row (sql/catalog/row_changes),
    so the lake is read once and only keys and hashes are joined: on 100,000 papers with 1%
    new, 3.4 s against 12.3 s for EXCEPT ALL over whole rows (bench/publish_delta.py). A
    change goes unseen only if a row's old and new versions, of the same key, hash alike: a
    chance of 2^-64 per changed row, far below that of a corrupted disk.

    Args:
        columns: the lake's and the stage's tables' columns (`table_columns`), when read
            already for all tables.
    """
    lake, stage = columns or (table_columns(con, LAKE), table_columns(con, "memory"))
    script = merge_script(name, keys, lake, stage)
    if script is None:
        return "replace"
    con.execute(script)
    return "merge"


def merge_script(
    name: str, keys: tuple[str, ...], lake: Columns, stage: Columns, published: str | None = None
) -> str | None:
    """The statements that stage <name>__removed and <name>__added (`plan_changes`), as one
    script; None where the table is new or its columns changed: it is replaced whole.

    Args:
        published: a table that holds the rows of lake.<name> (`keep_committed`'s), read
            in its place.
    """
    if name not in lake or lake[name] != stage[name]:
        return None
    target, staged = published or f"{LAKE}.main.{name}", f"{STAGE}.{name}"
    key_list = ", ".join(keys)
    sql = (
        read_sql("catalog/row_changes")
        .replace("{lake}", target)
        .replace("{staged}", staged)
        .replace("{row_hash}", row_hash(stage[name]))
        .replace("{same_key}", " and ".join(f"l.{k} is not distinct from s.{k}" for k in keys))
        .replace("{keys}", key_list)
    )
    changes = f"{STAGE}.{name}__changes"
    return ";\n".join(
        [
            f"create or replace table {changes} as {sql}",
            f"create or replace table {STAGE}.{name}__removed as "
            f"select distinct {key_list} from {changes} where staged_row is null",
            f"create or replace table {STAGE}.{name}__added as select * from {staged} "
            f"where rowid in (select staged_row from {changes})",
            f"drop table {changes}",
        ]
    )


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


def next_version(con: duckdb.DuckDBPyConnection) -> int:
    return con.execute(f"select max(snapshot_id) + 1 from {LAKE}.snapshots()").fetchone()[0]


def detach(con: duckdb.DuckDBPyConnection) -> None:
    """Detach the catalog; the connection's tables in memory stay."""
    con.execute("use memory")
    con.execute(f"detach {LAKE}")


def prepare(
    con: duckdb.DuckDBPyConnection,
    settings: Settings,
    frames: dict[str, pl.DataFrame] | None = None,
    hashes: dict[str, pl.DataFrame] | None = None,
    digests: dict[str, str] | None = None,
) -> dict[str, str]:
    """Attach the catalog for writing and plan the change of every keyed table; the plans,
    by table. A run does it while its suites run: `commit` applies the plans once the
    version passed its checks, or `detach` drops them.

    Without `frames`, the keyed tables are staged in memory.main already and each is
    compared with the catalog (`plan_changes`). With them (the tables as frames) and their
    `row_hashes` as `hashes`, where the cache holds the row hashes of the latest version
    (`PublishedRows`), those are compared in Polars and only the rows removed and added
    are staged; else the frames are staged whole and compared with the catalog.

    `digests`: each table's `table_digest`. A table whose digest is the one the latest
    version's commit kept (`PublishedDigests`) is planned `same` without reading the
    catalog: on a +1 run, the tables that did not change (as rejects and duplicates).
    The others are compared with <name>__published where `con` holds it (the tables of the
    latest version, `keep_committed`), else with the catalog's table: reading a table of a
    DuckLake catalog costs milliseconds of its metadata, more than comparing a small one.
    The 16 comparisons of a +1 run on the sample, in turns: 0.079 s against 0.176 s.
    """
    attach(con, settings, create=True)
    try:
        start_writing(con, settings)
        published = PublishedRows(settings).load(con) if hashes is not None else None
        if published is not None:
            return plan_from_hashes(con, frames, hashes, published)
        kept = PublishedDigests(settings).load(con) if digests else {}
        same = {name for name in TABLE_KEYS if name in kept and kept[name] == digests[name]}
        if frames is not None:
            stage_frames(con, {name: f for name, f in frames.items() if name not in same})
        lake, stage = table_columns(con, LAKE), table_columns(con, "memory")
        scripts = {
            name: merge_script(name, keys, lake, stage, published_copy(name, stage))
            for name, keys in TABLE_KEYS.items()
            if name not in same
        }
        # One script for all tables: each statement's end waits for the GIL, which the
        # suites running beside it in Python hold (pipeline.prompt_gil shortens the wait).
        # One transaction too (it writes memory only), not one per statement: the plan of a
        # +1 run on the sample, 10 turns each, median 0.25 s where it was 0.31 s.
        if any(scripts.values()):
            body = ";\n".join(s for s in scripts.values() if s)
            con.execute(f"begin transaction;\n{body};\ncommit")
        return {
            name: "same" if name in same else "merge" if scripts[name] else "replace"
            for name in TABLE_KEYS
        }
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # a script that failed in its transaction
            con.execute("rollback")
        detach(con)
        raise


def start_writing(con: duckdb.DuckDBPyConnection, settings: Settings) -> None:
    """Before this writer (which holds the run lock) writes data files: the data path must
    be the catalog's own, and the files a writer of it killed before its commit left,
    which no snapshot records, are deleted (`data_path`)."""
    data_path.claim(con, LAKE, settings, catalog_name(settings))
    if removed := data_path.begin_writing(con, LAKE, settings):
        logging.getLogger("paperlake").info(
            "deleted %d data files a run killed before its commit left", removed
        )


def published_copy(name: str, stage: Columns) -> str | None:
    """memory's <name>__published (`keep_committed`) where it has the staged table's columns."""
    kept = f"{name}__published"
    return f"{STAGE}.{kept}" if kept in stage and stage[kept] == stage.get(name) else None


ROW_HASH, COPY = "_row_hash", "_copy"
# Keyed tables of at least this many rows in all are planned from row hashes (see `prepare`):
# at 10,000 papers (about 200,000 rows) 0.25 s against 0.7 s for staging and comparing with
# the catalog, at 100,000 0.7 s against 3.6 s. Below it DuckDB's comparison is as quick and,
# unlike Polars' many small steps, leaves the GIL to the suites that run beside it.
HASHED_PLAN_ROWS = 20_000


def row_hashes(frame: pl.DataFrame, keys: tuple[str, ...]) -> pl.DataFrame:
    """Each row's key, a 64-bit hash of the whole row, and its copy number among rows equal
    in key and hash (so that n copies against m count as EXCEPT ALL counts them).

    Where no two rows hash alike every copy number is 0: counting them over 1.1 million
    neighbour rows takes 0.8 s, seeing that the hashes are distinct 0.02 s.
    """
    hashed = frame.select(keys).with_columns(frame.hash_rows().alias(ROW_HASH))
    if hashed[ROW_HASH].n_unique() == hashed.height:
        return hashed.with_columns(pl.lit(0, dtype=pl.UInt32).alias(COPY))
    copy = pl.int_range(pl.len(), dtype=pl.UInt32).over([*keys, ROW_HASH])
    return hashed.with_columns(copy.alias(COPY))


def plan_from_hashes(
    con: duckdb.DuckDBPyConnection,
    frames: dict[str, pl.DataFrame],
    hashes: dict[str, pl.DataFrame],
    published: dict[str, pl.DataFrame],
    keyed: dict[str, tuple[str, ...]] = TABLE_KEYS,
) -> dict[str, str]:
    """Plan each table from its frame's row hashes (`hashes`) and those of what the
    catalog holds (`published`), as `row_hashes` gives them: stage <name>__removed (the
    keys of rows gone or changed) and <name>__added (rows new or changed) as
    `plan_changes` does, without reading the catalog's tables. A table whose columns
    differ from the catalog's is replaced whole.

    Rows are matched by hash (and copy number) alone, the hash being of the whole row, key
    included: a change goes unseen only if a new row hashes like an old one (2^-64 a
    pair). Where no hash repeats, set membership of the hashes does it (0.05 s for 1.1
    million rows, where a join on keys and hash took 0.3 s)."""
    for name in frames:
        keys, frame, before = keyed[name], frames[name], published[name]
        now = hashes[name].with_row_index("_row")
        if now[COPY].max() in (0, None) and before[COPY].max() in (0, None):
            gone = ~pl.col(ROW_HASH).is_in(now[ROW_HASH].implode())
            came = ~pl.col(ROW_HASH).is_in(before[ROW_HASH].implode())
            removed, rows = before.filter(gone).select(keys), now.filter(came)["_row"]
        else:
            match = [ROW_HASH, COPY]
            removed = before.join(now, on=match, how="anti").select(keys)
            rows = now.join(before, on=match, how="anti")["_row"].sort()
        con.register(f"{name}__removed_frame", removed.unique())
        con.register(f"{name}__added_frame", frame[rows])
    con.execute(
        ";\n".join(
            f"create or replace table {STAGE}.{name}__{part} as select * from {name}__{part}_frame"
            for name in frames
            for part in ("removed", "added")
        )
    )
    for name in frames:
        for part in ("removed", "added"):
            con.unregister(f"{name}__{part}_frame")
    lake, stage = table_columns(con, LAKE), table_columns(con, "memory")
    replaced = [n for n in frames if n not in lake or lake[n] != stage[f"{n}__added"]]
    stage_frames(con, {name: frames[name] for name in replaced})
    return {name: "replace" if name in replaced else "merge" for name in frames}


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
