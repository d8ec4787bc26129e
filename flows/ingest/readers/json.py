"""JSON: JSON Lines (the arXiv OAI snapshot among them), JSON arrays and streams of
JSON values, read in chunks."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator, Mapping
from typing import IO

from flows.ingest.fields import ObjectFields, is_arxiv, parse_json_int
from flows.ingest.model import (
    SNIPPET_CHARS,
    WHOLE,
    FileOverride,
    Found,
    Layout,
    Reader,
    Span,
)
from flows.ingest.readers.common import (
    LongLine,
    long_line_record,
    numbered_lines,
    snippet,
    valid_text,
)

JSON_CHUNK = 1 << 20
# A JSON value that does not parse within this many characters is taken as broken.
JSON_MAX_RECORD = 64 << 20


def _sniff_json(text: str) -> tuple[str, str] | None:
    start = text.lstrip()
    if start.startswith("["):
        return ("json", "") if re.match(r"\[\s*(?:[{\]]|$)", start) else None
    if not start.startswith("{"):
        return None
    first, newline, _ = start.partition("\n")
    try:
        obj = json.loads(first, parse_int=parse_json_int)
    except (ValueError, RecursionError):
        # A line longer than the sniffed bytes is still JSON Lines; otherwise the objects
        # are pretty-printed and read as a stream of JSON values.
        return ("jsonl", "") if not newline else ("json", "")
    if not isinstance(obj, dict):
        return ("json", "")
    return ("arxiv" if is_arxiv(obj) else "jsonl"), ""


def read_jsonl(stream: IO[bytes], fields: ObjectFields, span: Span = WHOLE) -> Iterator[dict]:
    """Records of JSON Lines: one object a line; blank lines are not records.

    Args:
        span: the lines to read (see `numbered_lines`); the stream stands at its start.
    """
    for line_no, offset, line in numbered_lines(stream, span):
        record: dict = {"line": line_no, "byte_offset": offset}
        if isinstance(line, LongLine):
            yield long_line_record(record, line)
            continue
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            record["decode_error"] = f"invalid UTF-8 at byte {offset + exc.start}"
            record["raw_snippet"] = snippet(line)
            yield record
            continue
        try:
            obj = json.loads(text, parse_int=parse_json_int)
        except (ValueError, RecursionError) as exc:
            record["read_rule"] = "invalid_json"
            record["read_reason"] = f"invalid JSON: {_json_error(exc)}"
            record["raw_snippet"] = snippet(text)
            yield record
            continue
        yield fields.fill(record, obj, text)


def _json_error(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)


def read_json_stream(stream: IO[bytes], fields: ObjectFields) -> Iterator[dict]:
    """Records of a JSON array (or of JSON values one after another), read in chunks.

    Where a value does not parse, the rest of the file cannot be split into records: it
    becomes one rejected record at that place.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    parser = json.JSONDecoder(parse_int=parse_json_int)
    skip = re.compile(r"[\s,]*")
    buf, pos, eof = "", 0, False
    byte_at, line_at = 0, 1  # where buf[pos] lies in the file
    opened = False

    def advance(to: int) -> None:
        nonlocal pos, byte_at, line_at
        passed = buf[pos:to]
        byte_at += len(passed.encode("utf-8", "surrogateescape"))
        line_at += passed.count("\n")
        pos = to

    def fill() -> None:
        nonlocal buf, pos, eof
        data = stream.read(JSON_CHUNK)
        eof = not data
        buf = buf[pos:] + decoder.decode(data, final=eof)
        pos = 0

    while True:
        advance(skip.match(buf, pos).end())
        if pos >= len(buf):
            if eof:
                return
            fill()
            continue
        if buf[pos] == "[" and not opened:
            opened = True
            advance(pos + 1)
            continue
        if buf[pos] == "]" and opened:
            advance(pos + 1)
            continue
        try:
            obj, end = parser.raw_decode(buf, pos)
        except (ValueError, RecursionError) as exc:
            resume = _next_record_start(buf, pos)
            truncated = isinstance(exc, json.JSONDecodeError)
            if truncated and resume is None and not eof and len(buf) - pos < JSON_MAX_RECORD:
                fill()
                continue
            record = {
                "line": line_at,
                "byte_offset": byte_at,
                "read_rule": "invalid_json",
                "raw_snippet": valid_text(buf[pos : pos + SNIPPET_CHARS]),
            }
            where = _broken(exc, buf, pos)
            if resume is None:
                yield record | {
                    "read_reason": f"{where}; the rest of the file could not be split into records"
                }
                return
            yield record | {"read_reason": f"{where}; reading goes on at the next record"}
            advance(resume)
            continue
        if end == len(buf) and not eof:
            fill()  # a number or literal at the end of the buffer may continue
            continue
        record: dict = {"line": line_at, "byte_offset": byte_at}
        raw = buf[pos:end]
        advance(end)
        try:
            raw.encode("utf-8")
        except UnicodeEncodeError as exc:
            before = len(raw[: exc.start].encode("utf-8", "surrogateescape"))
            record["decode_error"] = f"invalid UTF-8 at byte {record['byte_offset'] + before}"
            raw = valid_text(raw)
            obj = json.loads(raw, parse_int=parse_json_int)
        yield fields.fill(record, obj, raw)


def _broken(exc: Exception, buf: str, pos: int) -> str:
    """Why the JSON value at `pos` of `buf` does not parse."""
    if isinstance(exc, json.JSONDecodeError):
        line = exc.lineno - buf.count("\n", 0, pos)
        return f"invalid JSON: {exc.msg} at line {line} of the record"
    return f"invalid JSON: {_json_error(exc)}"


def _next_record_start(buf: str, pos: int) -> int | None:
    """Where the record after a broken one starts: the next line that opens an object at
    the broken record's indentation (pretty-printed JSON), if the buffer holds one."""
    line_start = buf.rfind("\n", 0, pos) + 1
    indent = buf[line_start:pos]
    if indent.strip():
        return None  # the record does not start its line: no layout to resume by
    found = buf.find(f"\n{indent}{{", pos + 1)
    return None if found < 0 else found + 1


def sniff(text: str, columns: Mapping[str, str]) -> Found | None:
    """jsonl, arxiv or json, when the head opens a JSON object or array."""
    return _sniff_json(text)


def record_starts(
    stream: IO[bytes], layout: Layout, override: FileOverride
) -> Iterator[tuple[int, int]]:
    """The byte offset and line of each record of JSON Lines: each line that is not blank."""
    for line_no, offset, line in numbered_lines(stream):
        if isinstance(line, LongLine) or line.strip():
            yield offset, line_no


def read_span(
    stream: IO[bytes], layout: Layout, override: FileOverride, span: Span
) -> Iterator[dict]:
    """The records of JSON Lines that start within `span`."""
    stream.seek(span.start)
    return read_jsonl(stream, ObjectFields(override.column_map), span)


def read(source: IO[bytes], layout: Layout, override: FileOverride) -> Iterator[dict]:
    """Records of JSON Lines one line each; of a JSON array or stream one value each."""
    fields = ObjectFields(override.column_map)
    if layout.format == "json":
        return read_json_stream(source, fields)
    return read_jsonl(source, fields)


READER = Reader(
    family="json",
    formats=("jsonl", "arxiv", "json"),
    read=read,
    extensions=(".json", ".jsonl", ".ndjson"),
    sniff=sniff,
    sniff_order=10,
    splits=("jsonl", "arxiv"),
    read_span=read_span,
    record_starts=record_starts,
)
