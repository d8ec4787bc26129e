"""CSV rows split by unquoted delimiters (an exporter that quotes nothing: a title's commas
shift the fields after it), rejoined where the columns of a known shape pin down one
reading."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence

from flows.ingest.fields import column_key

# Columns whose values have a recognisable shape: they anchor a repair of a shifted row.
URL_COLUMNS = {"url", "link", "forum", "forum_url", "pdf", "pdf_url", "paper_url", "openreview"}
ANCHOR_SHAPES = {
    "label": re.compile(r"^[^\n]{0,200}$"),
    "id": re.compile(r"^[\w.:/\-]{1,128}$"),
    "url": re.compile(r"^https?://\S+$"),
    "year": re.compile(r"^\s*(?:19|20)\d{2}\s*$"),
}
# A shifted row is rejoined only when this many surplus fields or fewer split it.
MAX_SURPLUS_FIELDS = 64
THOUSANDS_RE = re.compile(r"\d{3}(?!\d)")


def anchor_columns(header: Sequence[str], positions: Mapping[str, int]) -> dict[int, str]:
    """Columns that hold one field each, by position: those whose values have a known shape
    (id, link, year) and short labels (venue, decision) that carry no delimiter."""
    anchors = {i: "url" for i, name in enumerate(header) if column_key(name) in URL_COLUMNS}
    for name, kind in (("venue", "label"), ("decision", "label"), ("external_id", "id")):
        if name in positions:
            anchors[positions[name]] = kind
    if "year" in positions:
        anchors[positions["year"]] = "year"
    return anchors


def split_fields(text: str, delimiter: str) -> list[tuple[str, bool]]:
    """The fields of one CSV record, each with whether it was quoted."""
    fields: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while True:
        if i < n and text[i] == '"':
            j, value = i + 1, []
            while j < n:
                if text[j] == '"':
                    if text[j + 1 : j + 2] == '"':
                        value.append('"')
                        j += 2
                        continue
                    break
                value.append(text[j])
                j += 1
            end = text.find(delimiter, j)
            end = n if end < 0 else end
            fields.append(("".join(value) + text[j + 1 : end], True))
        else:
            end = text.find(delimiter, i)
            end = n if end < 0 else end
            fields.append((text[i:end], False))
        if end >= n:
            return fields
        i = end + 1


def repair_row(
    text: str, delimiter: str, width: int, anchors: Mapping[int, str]
) -> tuple[list[str] | None, str]:
    """Rejoin a row that unquoted delimiters split into too many fields.

    Every anchor column (id, link, year, label) takes one field of its shape; the other
    columns absorb the surplus, rejoining neighbouring unquoted fields. A reading is
    accepted when it is the only one, either among those that rejoin exactly where a
    delimiter sits inside prose (followed by a space, or a thousands separator as in
    72,413) and split everywhere else, or among all readings.

    Returns:
        the repaired values (or None) and, when None, why no repair was made.
    """
    if not any(kind in ("id", "url") for kind in anchors.values()):
        return None, "no id or link column to anchor a repair"
    fields = split_fields(text, delimiter)
    extra = len(fields) - width
    if extra <= 0:
        return None, "too few fields to repair"
    if extra > MAX_SURPLUS_FIELDS:
        return None, f"{extra} surplus fields, more than {MAX_SURPLUS_FIELDS} to rejoin"
    if fixed := _rejoin_prose(fields, width, anchors, delimiter):
        return fixed, ""
    readings = _rejoinings(fields, width, anchors, delimiter)
    if len(readings) == 1:
        return readings[0], ""
    if not readings:
        return None, "no rejoining of fields fits the id and link columns"
    return None, "more than one way to rejoin the fields fits the id and link columns"


def fits_anchor(value: str, kind: str | None) -> bool:
    return kind is None or bool(ANCHOR_SHAPES[kind].match(value))


def _rejoin_prose(
    fields: list[tuple[str, bool]], width: int, anchors: Mapping[int, str], delimiter: str
) -> list[str] | None:
    """The reading that rejoins fields exactly where the delimiter sits inside prose."""
    groups: list[list[tuple[str, bool]]] = [[fields[0]]]
    for before, after in itertools.pairwise(fields):
        value, quoted = after
        prose = value[:1].isspace() or (
            before[0][-1:].isdigit() and THOUSANDS_RE.match(value) is not None
        )
        inside = prose and not quoted and not before[1]
        if inside:
            groups[-1].append(after)
        else:
            groups.append([after])
    if len(groups) != width:
        return None
    values = []
    for column, group in enumerate(groups):
        kind = anchors.get(column)
        value = delimiter.join(v for v, _ in group)
        if (len(group) > 1 and kind is not None) or not fits_anchor(value, kind):
            return None
        values.append(value)
    return values


def _rejoinings(
    fields: list[tuple[str, bool]], width: int, anchors: Mapping[int, str], delimiter: str
) -> list[list[str]]:
    """Readings of the row that fit the anchor columns: none, one, or two (of maybe more)."""
    n = len(fields)

    def spans(column: int, start: int) -> Iterator[tuple[int, str]]:
        """(end, value) of the fields column `column` may take from `start` on."""
        kind = anchors.get(column)
        longest = 1 if kind is not None else n - start - (width - column - 1)
        for end in range(start + 1, start + longest + 1):
            if end - start > 1 and (fields[start][1] or fields[end - 1][1]):
                return  # a quoted field is whole: it is never rejoined with another
            value = delimiter.join(v for v, _ in fields[start:end])
            if fits_anchor(value, kind):
                yield end, value

    # ways[column][start]: readings of columns `column`.. over fields `start`.., counted up
    # to two. Column c starts between field c and field c + surplus.
    extra = n - width
    ways = [dict.fromkeys(range(c, c + extra + 1), 0) for c in range(width)] + [{n: 1}]
    for column in range(width - 1, -1, -1):
        for start in ways[column]:
            total = 0
            for end, _ in spans(column, start):
                total += ways[column + 1].get(end, 0)
                if total >= 2:
                    break
            ways[column][start] = min(total, 2)
    found = ways[0][0]
    if found != 1:
        return [[]] * found
    values, start = [], 0
    for column in range(width):
        end, value = next((e, v) for e, v in spans(column, start) if ways[column + 1].get(e, 0))
        values.append(value)
        start = end
    return [values]
