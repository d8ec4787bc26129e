"""What the stream readers share: numbered lines, snippets, undecodable bytes shown."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from flows.ingest.model import SNIPPET_CHARS, WHOLE, Span

# The longest line a record may have. Longer lines are read past in chunks, never held
# whole, and their record is rejected as too_long: a file of one 1 GB line costs a few MB.
MAX_LINE_BYTES = 4 << 20
SKIP_CHUNK = 1 << 20


@dataclass(frozen=True)
class LongLine:
    """A line longer than MAX_LINE_BYTES: its start, for the reject's snippet, and length."""

    head: bytes
    length: int

    def reason(self) -> str:
        return (
            f"a line of {self.length:,} bytes, longer than the {MAX_LINE_BYTES:,} bytes one "
            "record may have"
        )


def numbered_lines(
    stream: IO[bytes], span: Span = WHOLE
) -> Iterator[tuple[int, int, bytes | LongLine]]:
    """(1-based line number, byte offset, line) for every line of a binary stream; a line
    longer than MAX_LINE_BYTES comes as a LongLine, read past without being kept.

    Args:
        span: where the stream stands in its file (it is read from there, not moved), and
            the offset of the first line not to read.
    """
    offset, line_no, stop = span.start, span.line, span.stop
    while (stop is None or offset < stop) and (line := stream.readline(MAX_LINE_BYTES + 1)):
        line_no += 1
        length = len(line)
        if length > MAX_LINE_BYTES and not line.endswith(b"\n"):
            head = line[:SNIPPET_CHARS]
            while (rest := stream.readline(SKIP_CHUNK)) and not rest.endswith(b"\n"):
                length += len(rest)
            length += len(rest)
            line = LongLine(head, length)
        yield line_no, offset, line
        offset += length


def long_line_record(record: dict, line: LongLine) -> dict:
    """`record` as the too_long reject of an over-long line."""
    record["read_rule"] = "too_long"
    record["read_reason"] = line.reason()
    record["raw_snippet"] = snippet(line.head)
    return record


def snippet(raw: bytes | str) -> str:
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    return text[:SNIPPET_CHARS]


def valid_text(text: str) -> str:
    """Text with undecodable bytes (surrogate escapes) shown as U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", errors="replace")
