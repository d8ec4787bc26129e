"""Files a reader sees whole or not at all: the caches and records paperlake rewrites."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """`write(tmp)` beside `path`, then move tmp onto `path`: readers see the old file or
    the new one, never part of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)
