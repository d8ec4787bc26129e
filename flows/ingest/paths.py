"""Raw files: found under the raw paths, hashed, and placed below their raw folder."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

# Files in a raw folder that describe the data rather than hold it.
DOCUMENTATION_RE = re.compile(r"(?i)^(?:readme|license|licence|changelog|notice)(?:\.\w+)?$")


def discover(paths: Iterable[Path]) -> list[Path]:
    """Raw files under `paths`: files as given, folders read recursively, hidden names skipped."""
    found: list[Path] = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            found.extend(
                p
                for p in sorted(path.rglob("*"))
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"raw input {path} does not exist")
    # The same file named twice (a folder and a file inside it) is read once.
    unique: dict[Path, Path] = {}
    for p in found:
        unique.setdefault(p.resolve(), p)
    return list(unique.values())


def file_digest(path: Path) -> tuple[str, int]:
    """sha256 and size of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def try_digest(path: Path) -> tuple[str, int, str | None]:
    """sha256 and size of a file, or, where it cannot be read (EIO, a vanished file), a
    stand-in hash naming the error, size 0 and the error for the file's sources row."""
    try:
        return (*file_digest(path), None)
    except OSError as exc:
        return f"unreadable:{exc.errno}", 0, f"{path}: cannot be read: {exc.strerror or exc}"


def raw_place(path: Path, roots: Sequence[Path]) -> tuple[Path, str]:
    """The raw folder a file was found under and its path below it, in / form.

    A raw file named directly is placed in its own folder. The folder's name and the
    path below it are what may name the file's venue and year, and where a settings
    file for it belongs.
    """
    resolved = path.resolve()
    for root in roots:
        if root.is_dir() and root.resolve() in resolved.parents:
            return root, resolved.relative_to(root.resolve()).as_posix()
    return path.parent, path.name
