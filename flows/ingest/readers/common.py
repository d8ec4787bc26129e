"""What the stream readers share: numbered lines, snippets, undecodable bytes shown."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from flows.ingest.model import SNIPPET_CHARS


def numbered_lines(stream: IO[bytes]) -> Iterator[tuple[int, int, bytes]]:
    """(1-based line number, byte offset, line) for every line of a binary stream."""
    offset = 0
    for line_no, line in enumerate(stream, start=1):
        yield line_no, offset, line
        offset += len(line)


def snippet(raw: bytes | str) -> str:
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    return text[:SNIPPET_CHARS]


def valid_text(text: str) -> str:
    """Text with undecodable bytes (surrogate escapes) shown as U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", errors="replace")
