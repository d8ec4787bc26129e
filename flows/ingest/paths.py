"""Raw files: found under the raw paths, hashed, and placed below their raw folder."""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from flows.core import cache as sealed
from flows.ingest.rawfile import entry_kind, identity, open_regular, shown, walk

# Files in a raw folder that describe the data rather than hold it.
DOCUMENTATION_RE = re.compile(r"(?i)^(?:readme|license|licence|changelog|notice)(?:\.\w+)?$")


def discover(paths: Iterable[Path]) -> list[Path]:
    """Raw files under `paths`: files as given, folders read recursively (links to folders
    followed, each folder once), hidden names skipped.

    Entries that are not regular files (FIFOs, sockets, devices, broken links) are listed
    too, so that their sources rows say what they are; each real file (device and inode) is
    listed once, by a name that no link to a folder leads to where it has one.
    """
    found: list[tuple[Path, bool, object]] = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            found.extend(sorted(walk(path), key=lambda f: f[0]))
        elif path.exists() or path.is_symlink():
            found.append((path, False, identity(path)))
        else:
            raise FileNotFoundError(f"raw input {shown(path)} does not exist")
    # The same file named twice (a folder and a file inside it, a folder and a link to it,
    # two hard links) is read once.
    unique: dict[object, tuple[Path, bool]] = {}
    for p, linked, key in found:
        if key not in unique or (unique[key][1] and not linked):
            unique[key] = (p, linked)
    return [p for p, _ in unique.values()]


def file_digest(path: Path) -> tuple[str, int]:
    """sha256 and size of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with open_regular(path) as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def try_digest(path: Path, memo: DigestMemo | None = None) -> tuple[str, int, str | None]:
    """sha256 and size of a file, or, where it cannot be read (EIO, a vanished file, a FIFO),
    a stand-in hash naming the error, size 0 and the error for the file's sources row.
    With a `memo`, a file it knows unchanged is not read again."""
    if kind := entry_kind(path):  # never opened: a FIFO would block the run
        return f"not-regular:{kind}", 0, f"{shown(path)}: {kind}, not a regular file"
    try:
        return (*(memo.digest(path) if memo else file_digest(path)), None)
    except OSError as exc:
        return (
            f"unreadable:{exc.errno}",
            0,
            f"{shown(path)}: cannot be read: {shown(exc.strerror or exc)}",
        )


class DigestMemo:
    """The sha256 of raw files as last read, by path, size, modification time and inode,
    kept in a folder of the warehouse's cache: a file whose stat did not change is not read
    again, as git's index does.

    The memo is only a shortcut, and checked before it is taken: the file is a sealed
    record (flows/core/cache.py; one that fails is dropped with a warning and every file hashed
    again), and each entry holds a digest of its sha256 with the file's first and last
    EDGE bytes, which are read again on each use: a memo that names another file's sha256,
    or a file rewritten in place with its old size and time, is caught and the file hashed
    again. Files of at most 2 EDGE bytes are always hashed whole (that costs as much).

    An entry counts only for a file last modified RACY_SECONDS or more before the entry
    was made: a file written again within the same tick of the clock keeps its time.
    `save` writes the memo (atomically) when it learnt something, into a folder that
    exists (a warehouse not made yet gets none).
    """

    RACY_SECONDS = 2
    EDGE = 1 << 16
    NAME = "raw-digests.json"

    def __init__(self, folder: Path):
        self.path = folder / self.NAME
        self.known: dict[str, list] = {}
        try:
            known = sealed.read_record(self.path)
            if not isinstance(known, dict):
                raise sealed.Damaged(self.path, "not a memo of raw files")
            self.known = known
        except FileNotFoundError:
            pass
        except sealed.Damaged as damage:
            sealed.dropped(damage, "every raw file is hashed again")
        self.changed = False
        self.used: set[str] = set()

    def digest(self, path: Path) -> tuple[str, int]:
        """sha256 and size of `path`: from the memo where its stat and edges match."""
        stat = path.stat()
        if stat.st_size <= 2 * self.EDGE:
            return file_digest(path)
        key = str(path.resolve())
        self.used.add(key)
        seen = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
        entry = self.known.get(key)
        settled = isinstance(entry, list) and len(entry) == 6 and tuple(entry[:3]) == seen
        if settled and entry[4] - stat.st_mtime_ns >= self.RACY_SECONDS * 1_000_000_000:
            if edge_digest(path, entry[3], self.EDGE) == entry[5]:
                return entry[3], stat.st_size
            damage = sealed.Damaged(self.path, f"its entry for {path} disagrees with the file")
            sealed.warn(damage, f"{path} is hashed again")
        sha, size = file_digest(path)
        self.known[key] = [*seen, sha, time.time_ns(), edge_digest(path, sha, self.EDGE)]
        self.changed = True
        return sha, size

    def save(self) -> None:
        """Keep the entries of the files read since the memo was opened (others go)."""
        if (not self.changed and self.used == set(self.known)) or not self.path.parent.is_dir():
            return
        try:
            sealed.write_record(self.path, {k: self.known[k] for k in sorted(self.used)})
            self.changed = False
        except OSError:  # a memo that cannot be written costs the next run a re-read only
            pass


def input_digests(paths: Iterable[Path], cache_dir: Path) -> dict[str, str]:
    """The sha256 of every raw file under `paths`, by path, as `try_digest` gives it (a
    stand-in naming the error for a file that cannot be read), through the `DigestMemo`
    kept in `cache_dir`."""
    memo = DigestMemo(cache_dir)
    digests = {str(path): try_digest(path, memo)[0] for path in discover(paths)}
    memo.save()
    return digests


def edge_digest(path: Path, sha256: str, edge: int) -> str:
    """A digest of `sha256` with the first and last `edge` bytes of the file at `path`."""
    digest = hashlib.sha256(sha256.encode())
    with path.open("rb") as handle:
        digest.update(handle.read(edge))
        handle.seek(-edge, os.SEEK_END)
        digest.update(handle.read(edge))
    return digest.hexdigest()[:32]


def raw_place(path: Path, roots: Sequence[Path]) -> tuple[Path, str]:
    """The raw folder a file was found under and its path below it, in / form.

    A raw file named directly is placed in its own folder. The folder's name and the
    path below it are what may name the file's venue and year, and where a settings
    file for it belongs.
    """
    return RawPlaces(roots).place(path)


class RawPlaces:
    """`raw_place` for many files: each raw folder is resolved once."""

    def __init__(self, roots: Sequence[Path]):
        self.folders = [(root, root.resolve()) for root in roots if root.is_dir()]

    def place(self, path: Path, resolved: Path | None = None) -> tuple[Path, str]:
        """`raw_place` of `path` (whose resolved path is `resolved`, where known)."""
        resolved = resolved or path.resolve()
        for root, real in self.folders:
            if real in resolved.parents:
                return root, resolved.relative_to(real).as_posix()
        return path.parent, path.name
