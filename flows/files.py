"""Files a reader sees whole or not at all: the caches and records paperlake rewrites."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """`write(tmp)` beside `path`, then move tmp onto `path`: readers see the old file or
    the new one, never part of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)


def write_cache_parquet(path: Path, frame: pl.DataFrame) -> None:
    """Write `frame` atomically as a cache file that paperlake alone reads, and whole:
    uncompressed and without column statistics. 3.8 million rows of neighbour lists are
    written in 0.39 s and read in 0.07 s, where lz4 took 0.56 s and 0.12 s (82 MB against
    66); 1.2 million published row hashes in 0.12 s, where zstd took 0.22 s."""
    write_atomically(
        path, lambda tmp: frame.write_parquet(tmp, compression="uncompressed", statistics=False)
    )
