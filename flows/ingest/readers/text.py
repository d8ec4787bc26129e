"""Plain text: the sample format (a header line naming venue and year, then abstracts
separated by blank lines) and one abstract per line."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import IO

from flows.ingest.metadata import parse_header
from flows.ingest.model import SNIPPET_CHARS, FileOverride, Found, Layout, Reader
from flows.ingest.readers.common import MAX_LINE_BYTES, LongLine, long_line_record, numbered_lines


def _sniff_text(text: str) -> str:
    """blocks (abstracts separated by blank lines) or lines (one abstract per line)."""
    lines = text.splitlines()
    body = lines[1:-1] if lines and parse_header(lines[0]) else lines[:-1]
    return "blocks" if any(not line.strip() for line in body) else "lines"


def sniff(text: str, columns: Mapping[str, str]) -> Found:
    """Any text is blocks or lines: this sniff comes last and always finds one."""
    return _sniff_text(text), ""


def head_header(head: bytes) -> tuple[str, int] | None:
    """Venue and year from the file's first line, when it is a header line."""
    first_line = head.split(b"\n", 1)[0].decode("utf-8", errors="replace")
    return parse_header(first_line.lstrip("\ufeff"))


def read_text(stream: IO[bytes], fmt: str, has_header: bool) -> Iterator[dict]:
    """Records of the sample format (blank-line blocks) or of one abstract per line.

    A block is held up to MAX_LINE_BYTES; past that (one long line, or a block without
    blank lines) it is read to its end without being kept, and rejected as too_long.
    """
    block: list[bytes] = []
    block_line = block_offset = size = 0
    too_long: LongLine | None = None

    def record() -> dict:
        start = {"line": block_line, "byte_offset": block_offset}
        if too_long is not None:
            return long_line_record(start, too_long)
        raw = b"".join(block)
        try:
            text, error = raw.decode("utf-8"), None
        except UnicodeDecodeError as exc:
            text = raw.decode("utf-8", errors="replace")
            error = f"invalid UTF-8 at byte {block_offset + exc.start}"
        return start | {"abstract_raw": text} | ({"decode_error": error} if error else {})

    for line_no, start, line in numbered_lines(stream):
        if line_no == 1 and has_header:
            continue
        blank = not isinstance(line, LongLine) and not line.strip(b"\r\n")
        if fmt == "lines" or blank:
            if block or too_long:
                yield record()
                block, size, too_long = [], 0, None
            if fmt == "blocks":
                continue
        if not block and too_long is None:
            block_line, block_offset = line_no, start
        length = line.length if isinstance(line, LongLine) else len(line)
        if too_long is None and size + length <= MAX_LINE_BYTES:
            block.append(line)
        else:  # the record is past the limit: keep its start, count the rest
            head = too_long.head if too_long else b"".join(block)[:SNIPPET_CHARS]
            too_long = LongLine(head or getattr(line, "head", b""), size + length)
            block = []
        size += length
        if fmt == "lines":
            yield record()
            block, size, too_long = [], 0, None
    if block or too_long:
        yield record()


def read(source: IO[bytes], layout: Layout, override: FileOverride) -> Iterator[dict]:
    """Records of blocks or lines, past the header line when the file has one."""
    return read_text(source, layout.format, layout.header)


READER = Reader(
    family="text",
    formats=("blocks", "lines"),
    read=read,
    sniff=sniff,
    sniff_order=100,
    claims_any_text=True,
    file_header=head_header,
)
