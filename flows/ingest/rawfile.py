"""Raw files as the file system gives them: what kind of entry a path is, its name as
text, its bytes opened without ever blocking, and hashed exactly as they are read."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

# What a path is, where it is not a regular file (links followed).
ENTRY_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
}
HASH_CHUNK = 1 << 20


class NotRegularFile(OSError):
    """A path that is not a regular file where one was to be read."""

    def __init__(self, kind: str):
        super().__init__(errno.EINVAL, f"{kind}, not a regular file")


def shown(text: str | os.PathLike) -> str:
    """A path, or a message naming one, as valid UTF-8 text: the bytes of a file name that
    is not UTF-8 (which Python holds as surrogate escapes) written as \\xNN."""
    text = str(text)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that no file name gives
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def entry_kind(path: Path) -> str | None:
    """What `path` is where it is not a regular file ("a FIFO (named pipe)", "a broken
    symbolic link to ..."); None for a regular file, or for a path that vanished."""
    try:
        mode = path.stat().st_mode
    except OSError:
        if path.is_symlink():
            return f"a broken symbolic link (to {shown(os.readlink(path))})"
        return None
    if stat.S_ISREG(mode):
        return None
    return ENTRY_KINDS.get(stat.S_IFMT(mode), "a special file")


def open_regular(path: Path) -> io.FileIO:
    """`path` opened for reading, unbuffered. Opening never waits: a FIFO (which blocks an
    ordinary open until a writer comes), a device or a socket raises NotRegularFile."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(ENTRY_KINDS.get(stat.S_IFMT(mode), "a special file"))
        os.set_blocking(fd, True)
        return io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


class HashingReader(io.RawIOBase):
    """A file's bytes, hashed as they are read: `digest()` is the sha256 and size of exactly
    the bytes read, so a file appended to while it is read is described as it was read.

    Where reading stopped before the end (a reader that gave up on the rest of a file),
    `digest()` reads the rest too: its records stand for the whole file.
    """

    def __init__(self, file: io.FileIO):
        super().__init__()
        self.file = file
        self.sha = hashlib.sha256()
        self.size = 0
        self.ended = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.file.readinto(buffer)
        if n:
            self.sha.update(memoryview(buffer)[:n])
            self.size += n
        else:
            self.ended = True
        return n

    def tell(self) -> int:
        return self.size

    def close(self) -> None:
        self.file.close()
        super().close()

    def digest(self) -> tuple[str, int]:
        chunk = bytearray(HASH_CHUNK)
        while not self.ended:
            self.readinto(chunk)
        return self.sha.hexdigest(), self.size


def walk(root: Path) -> Iterator[tuple[Path, bool, object]]:
    """Every entry below the folder `root` that is not a folder, with whether a symbolic
    link to a folder led to it and what identifies the file it is (see `identity`). Links
    to folders are followed, each folder walked once (a link back up is not walked
    again); hidden names are skipped."""
    seen: set[tuple[int, int]] = set()
    stack = [(root, False)]
    while stack:
        folder, linked = stack.pop()
        try:
            info = folder.stat()
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue  # a folder that vanished or cannot be listed holds nothing to read
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = folder / entry.name
            link = entry.is_symlink()
            try:
                is_folder = entry.is_dir()
            except OSError:
                is_folder = False
            if is_folder:
                stack.append((path, linked or link))
            else:
                # An entry's inode comes with the listing; a link's target needs a stat.
                key = identity(path) if link else (info.st_dev, entry.inode())
                yield path, linked or link, key


def identity(path: Path) -> object:
    """What identifies the file at `path` (links followed): its device and inode, or the
    path itself where it cannot be looked at (a broken link)."""
    try:
        info = path.stat()
    except OSError:
        return path
    return (info.st_dev, info.st_ino)
