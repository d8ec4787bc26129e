"""CSV and TSV with a header: rows as the csv module reads them, a loose reading of rows
with quotes not doubled (readers/quotes.py), a repair of rows split by unquoted
delimiters (readers/shifted.py)."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from flows.ingest.fields import column_key, fill_fields, map_columns
from flows.ingest.model import WHOLE, FileOverride, Found, IngestError, Layout, Reader, Span
from flows.ingest.readers.common import snippet, valid_text
from flows.ingest.readers.quotes import read_loose_row
from flows.ingest.readers.shifted import anchor_columns, fits_anchor, repair_row

CSV_FIELD_LIMIT = 16 << 20
ABSTRACT_WORDS = ("abstract", "summary")


def _sniff_delimited(
    text: str,
    columns: Mapping[str, str],
    delimiters: Sequence[str] = ("\t", ",", ";", "|"),
    require_abstract: bool = True,
) -> tuple[str, str] | None:
    """csv or tsv and the delimiter, if the first line is a header with an abstract column
    (or, without `require_abstract`, with at least two columns)."""
    first = text.split("\n", 1)[0].rstrip("\r")
    if require_abstract and not _may_name_abstract(first, columns):
        return None  # the common case of a first line of prose, told without parsing it
    best: tuple[int, str] | None = None
    for delimiter in delimiters:
        if delimiter not in first:
            continue
        try:
            names = next(csv.reader([first], delimiter=delimiter))
        except csv.Error:
            continue
        score = len(map_columns(names, columns)) if require_abstract else len(names)
        fits = "abstract_raw" in map_columns(names, columns) or not require_abstract
        if fits and (best is None or score > best[0]):
            best = (score, delimiter)
    if best is None:
        return None
    return ("tsv" if best[1] == "\t" else "csv"), best[1]


def _may_name_abstract(line: str, columns: Mapping[str, str]) -> bool:
    """Whether a line holds a name an abstract column may have (every alias holds one of
    ABSTRACT_WORDS; a column the settings name, as `map_columns` reads it): where it does
    not, it is no header with one."""
    if any(word in line.casefold() for word in ABSTRACT_WORDS):
        return True
    named = columns.get("abstract_raw")
    return named is not None and column_key(named) in column_key(line)


class LineFeed:
    """Lines of a binary stream, decoded for the csv module, remembering their bytes.

    The csv module pulls exactly the lines of one record, so the feed knows where each
    record starts (line and byte offset) and what its raw bytes were.
    """

    def __init__(self, stream: IO[bytes], span: Span = WHOLE):
        self.lines = iter(stream)
        self.line_no = span.line
        self.offset = span.start
        self.raw: list[bytes] = []
        self.pending: list[bytes] = []  # lines given back, to be read again first

    def __iter__(self) -> LineFeed:
        return self

    def __next__(self) -> str:
        line = self.pending.pop(0) if self.pending else next(self.lines)
        self.line_no += 1
        self.offset += len(line)
        self.raw.append(line)
        # Undecodable bytes travel as surrogate escapes and are reported per record.
        return line.decode("utf-8", "surrogateescape")

    def give_back(self) -> None:
        """Read again the lines of the current record after its first one."""
        lines = self.raw[1:]
        del self.raw[1:]
        self.pending[:0] = lines
        self.line_no -= len(lines)
        self.offset -= sum(map(len, lines))


def read_delimited(
    stream: IO[bytes], delimiter: str, columns: Mapping[str, str], span: Span = WHOLE
) -> Iterator[dict]:
    """Records of CSV/TSV with a header; a quoted field may span lines.

    A row with too many fields is repaired when an id or link column pins down which
    field's commas shifted the rest; a one-line row in which one quoted field holds quotes
    that were not doubled is read when every other column parses (see readers/quotes.py);
    otherwise it is rejected, as are rows with too few.

    Args:
        span: the records to read; the stream stands at the file's start (its header).
    """
    table, feed = open_table(stream, delimiter, columns, span)
    for record, row in table.rows(feed, span.stop):
        yield record if row is None else table.record(record, row, feed)


def open_table(
    stream: IO[bytes], delimiter: str, columns: Mapping[str, str], span: Span = WHOLE
) -> tuple[Table, LineFeed]:
    """The header's table of a delimited file, and its lines from the span's start on
    (the stream is moved there where the span starts after the header)."""
    csv.field_size_limit(CSV_FIELD_LIMIT)
    feed = LineFeed(stream)
    try:
        header = next(csv.reader(feed, delimiter=delimiter, strict=True), [])
    except csv.Error as exc:
        raise IngestError(f"the header line cannot be read as CSV: {exc}") from None
    if header:
        header[0] = header[0].lstrip("\ufeff")
    if span.start:
        stream.seek(span.start)
        feed = LineFeed(stream, span)
    return Table(header, map_columns(header, columns), delimiter), feed


def _reject(rule: str, reason: str, raw: bytes) -> dict:
    return {"read_rule": rule, "read_reason": reason, "raw_snippet": snippet(raw)}


@dataclass
class Table:
    """What a delimited file's header says: its columns, which field each holds, and the
    columns that anchor the repair of a row."""

    header: list[str]
    positions: dict[str, int]
    delimiter: str

    def __post_init__(self):
        self.anchors = anchor_columns(self.header, self.positions)
        self.width = len(self.header)

    def rows(self, feed: LineFeed, stop: int | None = None) -> Iterator[tuple[dict, list | None]]:
        """Each record's place and its row as the csv module reads it, or as a loose reading
        reads it (see `loose_row`), up to the first record at or after byte `stop`: (record,
        row), the row None where it cannot be parsed (the record is then its reject).

        A loose reading may give lines back, so where a record starts is known only here:
        this is what a chunk's planning and its reading share. Blank lines are no records.
        """
        # strict: a quote in the wrong place is an error for that row, where a lenient
        # reader would silently run the following rows into one field.
        reader = csv.reader(feed, delimiter=self.delimiter, strict=True)
        while stop is None or feed.offset < stop:
            record: dict = {"line": feed.line_no + 1, "byte_offset": feed.offset}
            feed.raw.clear()
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                reader = csv.reader(feed, delimiter=self.delimiter, strict=True)
                row, problem = self.loose_row(feed)
                if row is None:
                    reason = f"CSV error: {exc}; {problem}"
                    yield record | _reject("unparseable_row", reason, b"".join(feed.raw)), None
                    continue
                record["read_flags"] = ["repaired_quotes"]
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line holds no record
            if len(row) != self.width:
                fixed, _ = self.loose_row(feed)
                if fixed is not None:
                    record["read_flags"] = ["repaired_quotes"]
                    row = fixed
            yield record, row

    def record(self, record: dict, row: list[str], feed: LineFeed) -> dict:
        """The record of a row `rows` read: its fields, or why it is rejected."""
        if len(row) != self.width:
            text = valid_text(b"".join(feed.raw).decode("utf-8", "surrogateescape"))
            fixed, problem = repair_row(
                text.rstrip("\r\n"), self.delimiter, self.width, self.anchors
            )
            if fixed is None:
                record["read_rule"] = "wrong_field_count"
                record["read_reason"] = (
                    f"row has {len(row)} fields, the header has {self.width}; {problem}"
                )
                record["raw_snippet"] = snippet(b"".join(feed.raw))
                return record
            record["read_flags"] = ["repaired_fields"]
            row = fixed
        raw = b"".join(feed.raw)
        record["raw_snippet"] = snippet(raw)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            record["decode_error"] = f"invalid UTF-8 at byte {record['byte_offset'] + exc.start}"
            row = [valid_text(value) for value in row]
        if "abstract_raw" not in self.positions:
            record["read_rule"] = "empty_abstract"
            record["read_reason"] = "no abstract column among the header's columns " + ", ".join(
                self.header[:20]
            )
            return record
        values = {f: row[i] for f, i in self.positions.items()}
        at = self.positions.get("external_id")
        return fill_fields(record, values, id_field=self.header[at] if at is not None else None)

    def loose_row(self, feed: LineFeed) -> tuple[list[str] | None, str]:
        """The current record read as one physical line in which one quoted field holds
        quotes that were not doubled; where the csv module read on into the next lines,
        they are given back to be read again. None and why, where it cannot be pinned."""
        lines = feed.raw
        if len(lines) > 1 and not any(k in ("id", "url") for k in self.anchors.values()):
            return None, "a row over more than one line with no id or link column to pin it"
        text = valid_text(lines[0].decode("utf-8", "surrogateescape")).rstrip("\r\n")
        width, anchors = self.width, self.anchors
        values, problem = read_loose_row(text, self.delimiter, width, anchors, fits_anchor)
        if values is not None and len(lines) > 1:
            feed.give_back()
        return values, problem


def sniff_table(text: str, columns: Mapping[str, str]) -> Found | None:
    """csv or tsv for a file named as a table: any header of two columns or more will do."""
    return _sniff_delimited(text, columns, require_abstract=False)


def read(source: IO[bytes], layout: Layout, override: FileOverride) -> Iterator[dict]:
    """Records of CSV/TSV in the delimiter detection found."""
    return read_delimited(source, layout.delimiter, override.column_map)


def read_span(
    stream: IO[bytes], layout: Layout, override: FileOverride, span: Span
) -> Iterator[dict]:
    """The records of CSV/TSV that start within `span`, read under the file's header."""
    return read_delimited(stream, layout.delimiter, override.column_map, span)


def record_starts(
    stream: IO[bytes], layout: Layout, override: FileOverride
) -> Iterator[tuple[int, int]]:
    """The byte offset and line of each record of CSV/TSV, as `read_delimited` finds them
    (its rows, not their fields)."""
    table, feed = open_table(stream, layout.delimiter, override.column_map)
    for record, _ in table.rows(feed):
        yield record["byte_offset"], record["line"]


READER = Reader(
    family="csv",
    formats=("csv", "tsv"),
    read=read,
    extensions=(".csv", ".tsv", ".tab"),
    sniff=_sniff_delimited,
    sniff_order=20,
    sniff_named=sniff_table,
    splits=("csv", "tsv"),
    read_span=read_span,
    record_starts=record_starts,
)
