"""A version's table as a file other tools read: Parquet, CSV or JSON Lines.

Parquet keeps every type: lists and structs as they are, and a vector column (the
embeddings, topic centroids) as a fixed-size array (FLOAT[384]) where all its vectors have
one length, so that polars reads it as an Array and pyarrow as a fixed_size_list. CSV has
no nested values: lists and structs are written as JSON text, as `query --format csv`
writes them. JSON Lines writes one object per row, lists as arrays.

A file is written under a temporary name beside its place and moved there whole, so an
export that fails leaves nothing half-written.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from flows.core.errors import WarehouseError
from flows.core.lake import LAKE
from flows.read.search_index import current_version

FORMATS = ("parquet", "csv", "jsonl")
SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
NESTED = ("list", "struct", "array", "map", "union")
VECTORS = ("FLOAT[]", "DOUBLE[]")  # list columns written as fixed-size arrays where they can be
BATCH_ROWS = 100_000  # rows of a Parquet row group: memory stays bounded for any table


def lake_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables and views of the attached version, by name."""
    rows = con.execute(
        "select table_name from duckdb_tables() where database_name = ? union "
        "select view_name from duckdb_views() where database_name = ? order by 1",
        [LAKE, LAKE],
    ).fetchall()
    return [name for (name,) in rows]


def quoted(name: str) -> str:
    """`name` as a DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def export_format(path: Path, fmt: str | None) -> str:
    """The format to write: `fmt` where given, else the one the path's suffix names, else
    Parquet."""
    if fmt is None:
        return SUFFIXES.get(path.suffix.lower(), "parquet")
    if fmt not in FORMATS:
        raise ValueError(f"format must be {', '.join(FORMATS[:-1])} or {FORMATS[-1]}, not {fmt!r}")
    return fmt


def export_table(
    con: duckdb.DuckDBPyConnection,
    table: str,
    path: Path | str,
    fmt: str | None = None,
    force: bool = False,
) -> int:
    """Write `table` of the attached version to `path`; the number of rows written.

    Args:
        fmt: parquet, csv or jsonl; None: from the path's suffix, else parquet.
        force: replace a file that is there.

    Raises:
        WarehouseError: the version has no such table.
        FileExistsError: `path` is there and `force` was not given.
    """
    path = Path(path)
    fmt = export_format(path, fmt)
    names = lake_tables(con)
    if table not in names:
        raise WarehouseError(
            f"no table {table!r} in version {current_version(con)} (tables: {', '.join(names)})"
        )
    if path.exists() and not force:
        raise FileExistsError(f"{path} exists already (force replaces it)")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder: give a file's path")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        rows = WRITERS[fmt](con, quoted(table), tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return rows


def write_parquet(con: duckdb.DuckDBPyConnection, table: str, target: Path) -> int:
    """Parquet through Arrow, batch by batch: DuckDB's own COPY writes a fixed-size array
    as a plain list, and Arrow keeps its size in the file's schema."""
    import pyarrow.parquet as pq

    relation = con.sql(f"select {arrays(con, table)} from {table}")
    rows = 0
    reader = relation.to_arrow_reader(BATCH_ROWS)
    with pq.ParquetWriter(target, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
            rows += batch.num_rows
    return rows


def arrays(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """The select list of `table` with each vector column cast to FLOAT[n] (DOUBLE[n])
    where every one of its vectors has n values; `*` where none does."""
    relation = con.sql(f"select * from {table}")
    vectors = [
        (name, str(kind))
        for name, kind in zip(relation.columns, relation.types, strict=True)
        if str(kind) in VECTORS
    ]
    if not vectors:
        return "*"
    spans = ", ".join(f"min(len({quoted(n)})), max(len({quoted(n)}))" for n, _ in vectors)
    lengths = con.execute(f"select {spans} from {table}").fetchone()
    casts = [
        f"{quoted(name)}::{kind[:-2]}[{low}] as {quoted(name)}"
        for (name, kind), low, high in zip(vectors, lengths[::2], lengths[1::2], strict=True)
        if low is not None and low == high and low > 0
    ]
    return f"* replace ({', '.join(casts)})" if casts else "*"


def write_csv(con: duckdb.DuckDBPyConnection, table: str, target: Path) -> int:
    """CSV with a header; lists and structs as JSON text."""
    relation = con.sql(f"select * from {table}")
    columns = ", ".join(
        f"to_json({quoted(name)})::varchar as {quoted(name)}" if kind.id in NESTED else quoted(name)
        for name, kind in zip(relation.columns, relation.types, strict=True)
    )
    return copy(con, f"select {columns} from {table}", target, "format csv, header true")


def write_jsonl(con: duckdb.DuckDBPyConnection, table: str, target: Path) -> int:
    """One JSON object per line; lists as arrays, structs as objects."""
    return copy(con, f"select * from {table}", target, "format json")


def copy(con: duckdb.DuckDBPyConnection, select: str, target: Path, options: str) -> int:
    """COPY `select` to `target`; the rows written."""
    where = str(target).replace("'", "''")
    return con.execute(f"copy ({select}) to '{where}' ({options})").fetchone()[0]


WRITERS = {"parquet": write_parquet, "csv": write_csv, "jsonl": write_jsonl}
