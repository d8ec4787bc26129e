"""Chunks: a big plain JSON Lines or CSV/TSV file planned as byte ranges that each start
at a record, and one range read with the lines and offsets it has in the whole file.

The plan is read off the file by the reader itself (`Reader.record_starts`: every line of
JSON Lines that is not blank; the rows of CSV as the csv module and the repair of loose
quotes find them, so a quoted line break is never a boundary). Each range knows the lines
and records before it and the sha256 of its bytes, so a chunk read later checks that it
reads the bytes the plan was made of.
"""

from __future__ import annotations

import hashlib
import io
from contextlib import ExitStack
from pathlib import Path

from flows.ingest.detect import open_binary
from flows.ingest.model import Chunk, Chunking, FileOverride, Layout, Span
from flows.ingest.rawfile import HASH_CHUNK, open_regular
from flows.ingest.readers import reader_for


def splits(layout: Layout, size: int, chunking: Chunking) -> bool:
    """Whether a file of this layout and size is read in chunks."""
    fmt = layout.format
    return not layout.gzip and size >= chunking.file_bytes and fmt in reader_for(fmt).splits


def plan_chunks(
    path: Path, layout: Layout, override: FileOverride, digest: tuple[str, int], chunk_bytes: int
) -> list[Chunk] | None:
    """The chunks of a file: ranges of about `chunk_bytes` that start at a record.

    None where the file is one chunk, or where its bytes are no longer those of `digest`
    (sha256 and size: it changed since it was hashed, and is read whole instead).
    """
    reader = reader_for(layout.format)
    starts = [(0, 0, 0)]  # byte offset, lines before, records before
    with ExitStack() as stack:
        stream, _, read = open_binary(path, False, stack)
        target = chunk_bytes
        for count, (offset, line) in enumerate(reader.record_starts(stream, layout, override)):
            if offset >= target:
                starts.append((offset, line - 1, count))
                target = offset + chunk_bytes
        if read() != digest or len(starts) < 2:
            return None
    stops = [offset for offset, _, _ in starts[1:]] + [digest[1]]
    hashes = range_hashes(path, stops, digest)
    if hashes is None:
        return None
    return [
        Chunk(i, len(starts), Span(offset, stop, lines), records, sha)
        for i, ((offset, lines, records), stop, sha) in enumerate(
            zip(starts, stops, hashes, strict=True)
        )
    ]


def range_hashes(path: Path, stops: list[int], digest: tuple[str, int]) -> list[str] | None:
    """The sha256 of each range of a file that ends at one of `stops`, the first starting at
    byte 0; None where the whole is not `digest` any more."""
    whole, hashes, at = hashlib.sha256(), [], 0
    with open_regular(path) as handle:
        for stop in stops:
            part = hashlib.sha256()
            while at < stop and (data := handle.read(min(HASH_CHUNK, stop - at))):
                part.update(data)
                whole.update(data)
                at += len(data)
            hashes.append(part.hexdigest())
        while data := handle.read(HASH_CHUNK):
            whole.update(data)
            at += len(data)
    return hashes if (whole.hexdigest(), at) == digest else None


class RangeReader:
    """A file opened for reading one span of it: lines and blocks as a binary stream gives
    them (seekable), the bytes of the span hashed as they are read (`sha256`)."""

    def __init__(self, path: Path, span: Span):
        self.file = io.BufferedReader(open_regular(path), HASH_CHUNK)
        self.stop = span.stop
        self.position = 0
        self.hashed = span.start  # the span's bytes are hashed up to here
        self.sha = hashlib.sha256()

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()

    def __iter__(self) -> RangeReader:
        return self

    def __next__(self) -> bytes:
        if line := self.readline():
            return line
        raise StopIteration

    def readline(self, size: int = -1) -> bytes:
        return self._seen(self.file.readline(size))

    def read(self, size: int = -1) -> bytes:
        return self._seen(self.file.read(size))

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.position = self.file.seek(offset, whence)
        return self.position

    def tell(self) -> int:
        return self.position

    def _seen(self, data: bytes) -> bytes:
        start, end = self.position, self.position + len(data)
        if start <= self.hashed < end and self.hashed < self.stop:
            self.sha.update(data[self.hashed - start : min(end, self.stop) - start])
            self.hashed = min(end, self.stop)
        self.position = end
        return data

    def sha256(self) -> str:
        """The sha256 of the span's bytes (those not read yet are read for it)."""
        if self.hashed < self.stop:
            self.seek(self.hashed)
            while self.hashed < self.stop and self.read(min(HASH_CHUNK, self.stop - self.hashed)):
                pass
        return self.sha.hexdigest()
