"""Planning a publish: what turns each published table into the staged one, by key and
row hash, staged in memory while the catalog is only read (one DuckDB transaction may
write to one database)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import duckdb
import polars as pl

from flows.core.held import held_back, published_columns, stand_ins
from flows.core.lake import LAKE, STAGE, attach, read_sql, stage_frames
from flows.core.settings import Settings
from flows.publish.published import PublishedDigests, PublishedRows
from flows.publish.stage import TABLE_KEYS, Columns, detach, start_writing, table_columns

ROW_HASH, COPY = "_row_hash", "_copy"
# Rows as published from rows as the run holds them (its papers hold the abstracts'
# hashes: flows/core/held.py); as they are where none are held back.
Fill = Callable[[pl.DataFrame], pl.DataFrame]


# Keyed tables of at least this many rows in all are planned from row hashes (see `prepare`;
# bench/publish_delta.py measures both ways). Below it DuckDB's comparison is as quick and,
# unlike Polars' many small steps, leaves the GIL to the suites that run beside it.
HASHED_PLAN_ROWS = 20_000
# Rows of a catalog's table read at a time where its row hashes are made (`catalog_hashes`).
CATALOG_BATCH_ROWS = 100_000
# Rows filled with their texts and staged at a time (`stage_filled`): each fill reads every
# part of the parse cache once (1.2 s at a million papers), each slice 0.35 GB of texts.
FILL_ROWS = 250_000


def as_held(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows as the run holds them are the rows published (nothing held back)."""
    return frame


def held(frame: pl.DataFrame, fill: Fill) -> bool:
    """Whether `frame` holds texts that `fill` reads back."""
    return fill is not as_held and bool(stand_ins(frame.columns))


def stage_filled(
    con: duckdb.DuckDBPyConnection, frames: dict[str, pl.DataFrame], fill: Fill
) -> None:
    """`stage_frames` of the frames as published (`fill`): one that holds texts back is filled
    and staged FILL_ROWS rows at a time, so that publish holds a slice's texts, not all."""
    stage_frames(con, {name: f for name, f in frames.items() if not held(f, fill)})
    for name, frame in frames.items():
        if not held(frame, fill):
            continue
        for start in range(0, max(frame.height, 1), FILL_ROWS):
            con.register("filled_frame", fill(frame.slice(start, FILL_ROWS)))
            into = f"insert into {STAGE}.{name}" if start else (
                f"create or replace table {STAGE}.{name} as")  # fmt: skip
            con.execute(f"{into} select * from filled_frame")
            con.unregister("filled_frame")


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


def row_hashes(frame: pl.DataFrame, keys: tuple[str, ...]) -> pl.DataFrame:
    """Each row's key, a 64-bit hash of the whole row, and its copy number among rows equal
    in key and hash (so that n copies against m count as EXCEPT ALL counts them).

    Where no two rows hash alike every copy number is 0, and seeing that the hashes are
    distinct is far quicker than counting copies.
    """
    return with_copies(frame.select(keys).with_columns(frame.hash_rows().alias(ROW_HASH)), keys)


def with_copies(hashed: pl.DataFrame, keys: tuple[str, ...]) -> pl.DataFrame:
    """Keys and row hashes (`hashed`) with each row's copy number (`row_hashes`)."""
    if hashed[ROW_HASH].n_unique() == hashed.height:
        return hashed.with_columns(pl.lit(0, dtype=pl.UInt32).alias(COPY))
    copy = pl.int_range(pl.len(), dtype=pl.UInt32).over([*keys, ROW_HASH])
    return hashed.with_columns(copy.alias(COPY))


def catalog_hashes(
    con: duckdb.DuckDBPyConnection,
    frames: dict[str, pl.DataFrame],
    keyed: dict[str, tuple[str, ...]] = TABLE_KEYS,
) -> dict[str, pl.DataFrame] | None:
    """`row_hashes` of the catalog's rows of each table of `frames`, where the cache kept
    none (`PublishedRows`), read a batch at a time as the frame's columns and types: only
    keys and hashes are held, not a copy of the table. The catalog's texts are hashed
    where the frame holds their hashes (flows/core/held.py).

    A table the catalog lacks, or holds with other columns, gets none: `plan_from_hashes`
    replaces it whole. None where the catalog holds none of the tables (a first version:
    each is staged whole once) or a table's rows cannot take the frame's types (the plan
    compares the tables in DuckDB instead)."""
    lake = table_columns(con, LAKE)
    if not lake.keys() & frames.keys():
        return None
    hashes = {}
    for name, frame in frames.items():
        keys, published = keyed[name], published_columns(frame.columns)
        if name not in lake or [column for column, _ in lake[name]] != published:
            hashes[name] = row_hashes(frame.clear(), keys)
            continue
        columns = ", ".join(f'"{column}"' for column in published)
        query = con.execute(f"select {columns} from {LAKE}.main.{name}")
        as_run = held_back if stand_ins(frame.columns) else as_held
        try:
            parts = [
                row_hashes(as_run(pl.from_arrow(batch)).cast(frame.schema), keys).drop(COPY)
                for batch in query.fetch_record_batch(CATALOG_BATCH_ROWS)
            ]
        except pl.exceptions.PolarsError:
            return None
        hashed = pl.concat(parts) if parts else row_hashes(frame.clear(), keys).drop(COPY)
        hashes[name] = with_copies(hashed, keys)
    return hashes


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
    so the lake is read once and only keys and hashes are joined, not whole rows as EXCEPT
    ALL joins them (bench/publish_delta.py compares the two). A change goes unseen only if
    a row's old and new versions, of the same key, hash alike: a chance of 2^-64 per
    changed row, far below that of a corrupted disk.

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


def published_copy(name: str, stage: Columns) -> str | None:
    """memory's <name>__published (`keep_committed`) where it has the staged table's columns."""
    kept = f"{name}__published"
    return f"{STAGE}.{kept}" if kept in stage and stage[kept] == stage.get(name) else None


def prepare(
    con: duckdb.DuckDBPyConnection,
    settings: Settings,
    frames: dict[str, pl.DataFrame] | None = None,
    hashes: dict[str, pl.DataFrame] | None = None,
    digests: dict[str, str] | None = None,
    fill: Fill = as_held,
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
    DuckLake catalog reads its metadata first, which costs more than comparing a small one.

    `fill` makes rows of a frame as published (the abstracts back in its papers): it
    is given the rows staged, not the whole frame, where a table is merged.
    """
    attach(con, settings, create=True)
    try:
        start_writing(con, settings)
        if hashes is not None:
            published = PublishedRows(settings).load(con) or catalog_hashes(con, frames)
            if published is not None:
                return plan_from_hashes(con, frames, hashes, published, fill=fill)
        kept = PublishedDigests(settings).load(con) if digests else {}
        same = {name for name in TABLE_KEYS if name in kept and kept[name] == digests[name]}
        if frames is not None:
            stage_filled(con, {name: f for name, f in frames.items() if name not in same}, fill)
        lake, stage = table_columns(con, LAKE), table_columns(con, "memory")
        scripts = {
            name: merge_script(name, keys, lake, stage, published_copy(name, stage))
            for name, keys in TABLE_KEYS.items()
            if name not in same
        }
        # One script for all tables: each statement's end waits for the GIL, which the
        # suites running beside it in Python hold (pipeline.prompt_gil shortens the wait).
        # One transaction too (it writes memory only), not one per statement.
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


def plan_from_hashes(
    con: duckdb.DuckDBPyConnection,
    frames: dict[str, pl.DataFrame],
    hashes: dict[str, pl.DataFrame],
    published: dict[str, pl.DataFrame],
    keyed: dict[str, tuple[str, ...]] = TABLE_KEYS,
    fill: Fill = as_held,
) -> dict[str, str]:
    """Plan each table from its frame's row hashes (`hashes`) and those of what the
    catalog holds (`published`), as `row_hashes` gives them: stage <name>__removed (the
    keys of rows gone or changed) and <name>__added (rows new or changed) as
    `plan_changes` does, without reading the catalog's tables. A table whose columns
    differ from the catalog's is replaced whole.

    Rows are matched by hash (and copy number) alone, the hash being of the whole row, key
    included: a change goes unseen only if a new row hashes like an old one (2^-64 a
    pair). Where no hash repeats, set membership of the hashes does it, quicker than a
    join on keys and hash."""
    staged = {}
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
        staged[f"{name}__removed"] = removed.unique()
        staged[f"{name}__added"] = frame[rows]
    stage_filled(con, staged, fill)
    lake, stage = table_columns(con, LAKE), table_columns(con, "memory")
    replaced = [n for n in frames if n not in lake or lake[n] != stage[f"{n}__added"]]
    stage_filled(con, {name: frames[name] for name in replaced}, fill)
    return {name: "replace" if name in replaced else "merge" for name in frames}
