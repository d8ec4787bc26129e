"""Cache files, sealed when written and checked before they are trusted.

Every cache paperlake keeps in a warehouse (parses, vectors, neighbour lists, per-paper
rows, row hashes, ...) writes its files through here. A Parquet file gets a seal beside it
(`<name>.seal`: its sha256, size and rows), a JSON record carries its own digest. Reading
checks the seal, then the content (each cache passes a check of what its rows must hold:
ids that exist, finite scores, row counts). A file that fails is `Damaged`: the cache drops
it with one warning line (`dropped`) and computes its content again; nothing it held is
ever used, let alone published.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import polars as pl

from flows.core.files import write_atomically
from flows.core.run_record import run_logger

SEAL = ".seal"

Check = Callable[[pl.DataFrame], str | None]  # why the rows cannot be trusted, or None
T = TypeVar("T")


class Damaged(Exception):
    """A cache file that cannot be trusted, and why."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def seal_path(path: Path) -> Path:
    return path.with_name(path.name + SEAL)


def file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def write_parquet(path: Path, frame: pl.DataFrame, whole: bool = True) -> None:
    """Write `frame` to `path` and seal it; each file is replaced whole, the seal last.

    Args:
        whole: uncompressed and without column statistics, for files paperlake alone
            reads, and whole (most caches); else polars' defaults (zstd), for files a
            run reads in part.
    """
    if whole:
        write_atomically(
            path, lambda tmp: frame.write_parquet(tmp, compression="uncompressed", statistics=False)
        )
    else:
        write_atomically(path, frame.write_parquet)
    seal(path, frame.height)


def seal(path: Path, rows: int) -> None:
    """Seal a file written whole: its sha256, size and `rows`, checked by `verify`."""
    record = {"sha256": file_sha256(path), "bytes": path.stat().st_size, "rows": rows}
    text = json.dumps(record)
    write_atomically(seal_path(path), lambda tmp: tmp.write_text(text))


def write_parquet_batches(path: Path, frames: Iterable[pl.DataFrame]) -> int:
    """Write `frames` (one schema) to `path` one after another, each a row group, and seal
    it: a file larger than memory, written as its rows are made. Returns its rows.
    zstd-compressed with column statistics, like `write_parquet(whole=False)`."""
    import pyarrow.parquet as pq

    rows = 0

    def write(tmp: Path) -> None:
        nonlocal rows
        writer = None
        try:
            for frame in frames:
                table = frame.to_arrow()
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema, compression="zstd")
                writer.write_table(table.cast(writer.schema))
                rows += frame.height
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            raise ValueError(f"{path}: no rows to write")

    write_atomically(path, write)
    seal(path, rows)
    return rows


def sink_parquet(path: Path, frame: pl.LazyFrame) -> int:
    """Write the rows of `frame` to `path` as polars streams them, and seal it: a file
    larger than memory, read and written in pieces. Returns its rows."""
    import pyarrow.parquet as pq

    write_atomically(path, frame.sink_parquet)
    rows = pq.ParquetFile(path).metadata.num_rows
    seal(path, rows)
    return rows


def verify(path: Path) -> dict:
    """The seal of `path` where the file's bytes match it.

    Raises:
        FileNotFoundError: there is no such file (nothing was cached).
        Damaged: no seal (written by an earlier paperlake, or cut short), or bytes that
            differ from it.
    """
    if not path.is_file():
        raise FileNotFoundError(path)
    try:
        seal = json.loads(seal_path(path).read_text())
        expected, size = str(seal["sha256"]), int(seal["bytes"])
    except (OSError, ValueError, KeyError, TypeError):
        raise Damaged(path, "no readable seal") from None
    if path.stat().st_size != size:
        raise Damaged(path, f"{path.stat().st_size} bytes where its seal says {size}")
    if file_sha256(path) != expected:
        raise Damaged(path, "its bytes differ from its seal (sha256)")
    return seal


def read_parquet(path: Path, check: Check | None = None) -> pl.DataFrame:
    """The rows of a sealed Parquet file, checked.

    Raises:
        FileNotFoundError: there is no such file.
        Damaged: the file fails its seal, cannot be read, or its rows fail `check`.
    """
    seal = verify(path)
    try:
        frame = pl.read_parquet(io.BytesIO(path.read_bytes()))
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise Damaged(path, f"unreadable: {exc}") from None
    if frame.height != seal.get("rows", frame.height):
        raise Damaged(path, f"{frame.height} rows where its seal says {seal['rows']}")
    if check is not None and (reason := check(frame)):
        raise Damaged(path, reason)
    return frame


def load(path: Path, check: Check | None, redo: str, *entry: Path) -> pl.DataFrame | None:
    """The rows of a sealed Parquet file, checked; None where there is none, or where it is
    damaged (then dropped, with the entry it belongs to, and `redo` said: `dropped`)."""
    try:
        return read_parquet(path, check)
    except FileNotFoundError:
        return None
    except Damaged as damage:
        dropped(damage, redo, *entry)
        return None


def write_record(path: Path, record: object) -> None:
    """Write a JSON record with its digest inside, replaced whole."""
    body = json.dumps(record, sort_keys=True)
    digest = hashlib.sha256(body.encode()).hexdigest()
    text = json.dumps({"sha256": digest, "record": record}, sort_keys=True)
    write_atomically(path, lambda tmp: tmp.write_text(text))


def read_record(path: Path) -> object:
    """A JSON record `write_record` wrote, checked against its digest.

    Raises:
        FileNotFoundError: there is no such file.
        Damaged: it does not parse or its content differs from its digest.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Damaged(path, f"unreadable: {exc}") from None
    try:
        wrapped = json.loads(text)
        record, digest = wrapped["record"], wrapped["sha256"]
    except (ValueError, KeyError, TypeError):
        raise Damaged(path, "not a sealed record") from None
    if hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest() != digest:
        raise Damaged(path, "its content differs from its digest")
    return record


def drop(path: Path) -> None:
    """Remove a cache file (and its seal) or a cache folder."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
        return
    with contextlib.suppress(OSError):  # where it cannot be removed, it stays unsealed
        seal_path(path).unlink(missing_ok=True)
        path.unlink(missing_ok=True)


def dropped(damage: Damaged, redo: str, *entry: Path) -> None:
    """Say in one warning line that a damaged cache file is dropped and what is computed
    again (`redo`), and drop it (or the files and folders of the `entry` it belongs to)."""
    for path in entry or (damage.path,):
        drop(path)
    warn(damage, f"dropped; {redo}")


def warn(damage: Damaged, what: str) -> None:
    """The one warning line of a damaged cache file: what it is, why, and `what` is done."""

    run_logger().warning("cache: %s is damaged (%s): %s", damage.path, damage.reason, what)


# A folder of cache files kept whole (a long-lived search's vectors and postings): written
# under a temporary name with a record of its files' digests, moved into place at once,
# and checked against the record when opened.
RECORD = "record.json"


@contextlib.contextmanager
def folder_in_place(folder: Path) -> Iterator[Path]:
    """A fresh temporary folder beside `folder` to write into, moved into place whole on
    leaving (where another process wrote the same folder meanwhile, that one is kept);
    removed where the writing fails."""
    tmp = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.replace(tmp, folder)
    except OSError:
        if not folder.is_dir():
            raise
        shutil.rmtree(tmp)


def write_folder_record(folder: Path, files: Iterable[str], **facts: object) -> None:
    """Record the digests of `files` of `folder`, and `facts` (counts), in its record."""
    write_record(folder / RECORD, {name: file_sha256(folder / name) for name in files} | facts)


def read_folder_record(folder: Path, files: Iterable[str]) -> dict:
    """The record of a folder `write_folder_record` wrote, `files` checked against it.

    Raises:
        Damaged: a file differs from what the record says.
        OSError, KeyError, TypeError, ValueError: a file or the record is unreadable.
    """
    record = read_record(folder / RECORD)
    for name in files:
        if file_sha256(folder / name) != record[name]:
            raise Damaged(folder / name, "it differs from its record")
    return record


def opened(folder: Path, kind: Callable[[Path], T], redo: str) -> T | None:
    """`kind(folder)`: a folder of cache files opened and checked; None where there is
    none, or where it is damaged (then it is dropped, with one warning saying `redo`)."""
    try:
        return kind(folder)
    except FileNotFoundError:
        return None
    except Damaged as damage:
        dropped(damage, redo, folder)
        return None
