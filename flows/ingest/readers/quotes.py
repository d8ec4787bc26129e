"""CSV rows in which one quoted field holds quotes that were not doubled, as some exports
write an abstract: `"a "so-called" method"`. The csv module stops at the first such quote
(or, at a quote that ends the field, runs on into the next lines); where the row is one
physical line and every other column parses as CSV, the loose field is what lies between.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

# More places where a loose field may end than this and the row is not tried.
MAX_ENDS = 64


def field_at(text: str, start: int, delimiter: str) -> tuple[str, int] | None:
    """The CSV field that starts at `start` and where it ends (at a delimiter or the end of
    the text); None where it is not a field a careful writer makes: a quoted field whose
    closing quote is not followed by a delimiter, or an unquoted one holding a quote."""
    n = len(text)
    if text.startswith('"', start):
        pieces, at = [], start + 1
        while (quote := text.find('"', at)) >= 0:
            pieces.append(text[at:quote])
            if not text.startswith('""', quote):
                end = quote + 1
                return ("".join(pieces), end) if end == n or text[end] == delimiter else None
            pieces.append('"')
            at = quote + 2
        return None
    end = text.find(delimiter, start)
    end = n if end < 0 else end
    return None if '"' in text[start:end] else (text[start:end], end)


def fields_from(text: str, start: int, count: int, delimiter: str) -> tuple[list[str], int] | None:
    """`count` careful fields from `start` on, and where the last one ends; None where they
    are not there (the text ends early, or a field is not careful)."""
    values, at, end = [], start, start - 1
    for _ in range(count):
        if end >= len(text) or (found := field_at(text, at, delimiter)) is None:
            return None
        value, end = found
        values.append(value)
        at = end + 1
    return values, end


def loose_readings(text: str, delimiter: str, width: int, column: int) -> list[list[str]]:
    """The readings of a one-line row of `width` columns in which column `column` is quoted
    and holds quotes that were not doubled, every other column a careful field."""
    head = fields_from(text, 0, column, delimiter)
    if head is None:
        return []
    before, end = head
    start = end + 1 if column else 0
    if not text.startswith('"', start):
        return []
    after = width - column - 1
    if after:
        closing = '"' + delimiter
        ends = [m.start() for m in re.finditer(re.escape(closing), text) if m.start() > start]
    else:
        ends = [len(text) - 1] if len(text) - start >= 2 and text.endswith('"') else []
    if len(ends) > MAX_ENDS:
        return []
    readings = []
    for quote in ends:
        inner = text[start + 1 : quote]
        if not _loose(inner, delimiter):
            continue
        tail = fields_from(text, quote + 2, after, delimiter) if after else ([], len(text))
        if tail is not None and tail[1] == len(text):
            readings.append([*before, inner, *tail[0]])
    return readings


def _loose(inner: str, delimiter: str) -> bool:
    """Whether a quoted field's inside reads as prose with quotes left undoubled: it holds a
    quote, but no doubled one (a writer that doubles quotes doubles them all) and no quote,
    delimiter, quote (the boundary of two fields, not prose)."""
    return '"' in inner and '""' not in inner and f'"{delimiter}"' not in inner


def read_loose_row(
    text: str,
    delimiter: str,
    width: int,
    anchors: Mapping[int, str],
    fits: Callable[[str, str | None], bool],
) -> tuple[list[str] | None, str]:
    """The values of a one-line row with one loose quoted field, where exactly one reading
    fits: one column's quotes not doubled, every other column careful CSV, the id, link,
    year and label columns of their shape.

    Returns:
        the values (or None) and, when None, why the row could not be pinned down.
    """
    readings = []
    for column in range(width):
        if column in anchors:
            continue  # ids, links, years and labels hold no prose to quote
        for values in loose_readings(text, delimiter, width, column):
            if all(fits(values[i], kind) for i, kind in anchors.items()):
                readings.append(values)
    if len(readings) == 1:
        return readings[0], ""
    if not readings:
        return (
            None,
            "no reading with one field's inner quotes left undoubled fits the other columns",
        )
    return None, "more than one reading with a field's inner quotes left undoubled fits"
