"""One printer for every command that prints rows.

`table` is for people and is shortened the way duckdb's CLI shortens its box: values cut
to fit, columns past the terminal's width (COLUMNS is respected) left out from the middle,
and only the first and last rows of a long result, with the counts of what was left out.
csv, json, jsonl and markdown are for machines and documents: every row, unshortened.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterable
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich import box
from rich.cells import cell_len
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    import polars as pl

MAX_ROWS = 40  # as duckdb's CLI: a longer result shows its first and last 20 rows
COLUMN_WIDTH = 20  # as duckdb's CLI: values are cut here, unless the terminal has room
BORDER = 1  # a table's left edge
CELL_EDGES = 3  # a column's padding on both sides and its right edge
ELIDED = "…"  # header of the column that stands for the columns left out
ELIDED_ROW = "·"  # every cell of the line that stands for the rows left out
CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # newlines and tabs would break a table's rows

out = Console(soft_wrap=True)
err = Console(stderr=True)


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    jsonl = "jsonl"
    markdown = "markdown"


def fail(message: str, code: int = 1) -> NoReturn:
    """Say what went wrong on stderr, on one line however long, and end the command."""
    err.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def terminal_width() -> int:
    """The terminal's width: $COLUMNS, else the terminal's own, else 80."""
    return shutil.get_terminal_size((80, 24)).columns


def print_frame(
    frame: pl.DataFrame,
    fmt: Format = Format.table,
    max_rows: int = MAX_ROWS,
    title: str | None = None,
    width: int | None = None,
    by_importance: bool = False,
) -> None:
    """Print rows in a format: a table shortened to `width`, or every row as text.

    Args:
        max_rows: rows a table shows at most, half from the start and half from the end;
            0 shows every row.
        width: the table's width (default: the terminal's).
        by_importance: the columns are in order of importance: a narrow table keeps the
            first ones (else it keeps both ends, as duckdb's CLI does).
    """
    frame = with_infinite_as_text(frame)
    if fmt == Format.table:
        box = table(frame, width or terminal_width(), max_rows, title, by_importance)
        out.print(box, highlight=False)
    else:
        sys.stdout.write(as_text(frame, fmt))


def with_infinite_as_text(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with each date or timestamp column that holds DuckDB's infinity or -infinity
    as text, `infinity` beside the other values as DuckDB writes them.

    polars holds infinity as the largest value of its unit (DuckDB's own), which no Python
    date can hold and whose printing breaks every format.
    """
    import polars as pl

    changed = []
    for name, dtype in frame.schema.items():
        if dtype != pl.Date and not isinstance(dtype, pl.Datetime):
            continue
        top = 2**31 - 1 if dtype == pl.Date else 2**63 - 1
        raw = pl.col(name).to_physical()
        if not frame.select((raw.abs() == top).any()).item():
            continue
        fmt = "%Y-%m-%d"
        if dtype != pl.Date:
            fmt += " %H:%M:%S%.f" + ("%:z" if dtype.time_zone else "")
        finite = pl.when(raw.abs() == top).then(0).otherwise(raw).cast(dtype).dt.to_string(fmt)
        changed.append(
            pl.when(raw == top)
            .then(pl.lit("infinity"))
            .when(raw == -top)
            .then(pl.lit("-infinity"))
            .otherwise(finite)
            .alias(name)
        )
    return frame.with_columns(changed) if changed else frame


def as_text(frame: pl.DataFrame, fmt: Format) -> str:
    """Every row of `frame` as CSV, JSON, JSON Lines or a markdown table."""
    if fmt == Format.csv:
        return flat(frame).write_csv()
    if fmt == Format.json:
        return json.dumps(frame.to_dicts(), indent=2, default=str) + "\n"
    if fmt == Format.jsonl:
        return "".join(json.dumps(row, default=str) + "\n" for row in frame.iter_rows(named=True))
    if fmt == Format.markdown:
        return markdown(frame)
    raise ValueError(f"{fmt} is not a text format")


def flat(frame: pl.DataFrame) -> pl.DataFrame:
    """Nested columns (lists, structs) as JSON text, for CSV."""
    import polars as pl

    return frame.with_columns(
        pl.Series(
            c,
            [None if v is None else json.dumps(v, default=str) for v in frame[c].to_list()],
            dtype=pl.String,
        )
        for c, dtype in frame.schema.items()
        if dtype.is_nested()
    )


def markdown(frame: pl.DataFrame) -> str:
    """A markdown (GitHub) table of every row; numbers right-aligned."""

    def cell(value: Any) -> str:
        if value is None:
            return ""
        text = json.dumps(value, default=str) if isinstance(value, list | dict) else str(value)
        return text.replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")

    rule = ("---:" if dtype.is_numeric() else "---" for dtype in frame.dtypes)
    lines = [
        "| " + " | ".join(map(cell, frame.columns)) + " |",
        "|" + "|".join(rule) + "|",
        *("| " + " | ".join(map(cell, row)) + " |" for row in frame.iter_rows()),
    ]
    return "\n".join(lines) + "\n"


def cell_text(value: Any) -> str:
    """A value as a table cell shows it: on one line, NULL for a missing value."""
    if value is None:
        return "NULL"
    text = json.dumps(value, default=str) if isinstance(value, list | dict) else str(value)
    return CONTROL.sub(" ", text)


def type_name(dtype: Any) -> str:
    """A column's type, short: int64, string, float32[], struct."""
    inner = getattr(dtype, "inner", None)
    if inner is not None:  # List and Array
        return type_name(inner) + "[]"
    return dtype.base_type().__name__.lower()


def fit(natural: list[int], width: int, by_importance: bool = False) -> tuple[list[int], list[int]]:
    """Which columns a table of `width` shows, and how wide each is.

    As duckdb's CLI: each column is cut to COLUMN_WIDTH; if they do not all fit, columns
    are kept from both ends towards the middle (or from the first, `by_importance`) while
    they fit beside one column marking the left-out ones. Room to spare widens the cut
    columns, evenly, up to their natural width.

    Args:
        natural: each column's width uncut (widest of header and shown values).

    Returns:
        the shown columns' indices (ascending) and their widths.
    """

    def needed(widths: Iterable[int], elided: bool) -> int:
        widths = list(widths)
        return BORDER + sum(widths) + CELL_EDGES * len(widths) + (1 + CELL_EDGES) * elided

    cut = [min(w, COLUMN_WIDTH) for w in natural]
    shown = list(range(len(natural)))
    if needed(cut, False) > width:
        ends = [i for pair in zip(shown, reversed(shown), strict=True) for i in pair]
        if by_importance:
            ends = shown
        kept: list[int] = []
        for i in dict.fromkeys(ends):
            if needed((cut[j] for j in [*kept, i]), True) > width:
                break
            kept.append(i)
        shown = sorted(kept) or [0]
        if not kept:  # not even one column fits: the first, as wide as there is room
            cut[0] = max(1, width - needed([], True) - CELL_EDGES)
    widths = [cut[i] for i in shown]
    spare = width - needed(widths, len(shown) < len(natural))
    while spare > 0 and any(w < natural[i] for w, i in zip(widths, shown, strict=True)):
        for k, i in enumerate(shown):
            if spare > 0 and widths[k] < natural[i]:
                widths[k] += 1
                spare -= 1
    return shown, widths


def table(
    frame: pl.DataFrame,
    width: int,
    max_rows: int = MAX_ROWS,
    title: str | None = None,
    by_importance: bool = False,
) -> Group:
    """`frame` as a box no wider than `width`, with a line saying what was left out."""
    if not frame.width:
        return Group(Text("no columns"))
    cut_rows = 0 < max_rows < frame.height
    if cut_rows:
        head, tail = (max_rows + 1) // 2, max_rows // 2
        rows = [*frame.head(head).rows(), None, *frame.tail(tail).rows()]
    else:
        rows = frame.rows()
    names, types = frame.columns, [type_name(t) for t in frame.dtypes]
    cells = [None if row is None else [cell_text(v) for v in row] for row in rows]
    natural = [
        max([cell_len(name), cell_len(kind)] + [cell_len(r[i]) for r in cells if r is not None])
        for i, (name, kind) in enumerate(zip(names, types, strict=True))
    ]
    shown, widths = fit(natural, width, by_importance)
    gap = next((k + 1 for k in range(len(shown) - 1) if shown[k + 1] != shown[k] + 1), None)
    if len(shown) < frame.width and gap is None:
        gap = len(shown)  # only the first column fits
    grid = Table(box=box.SQUARE, title=title, title_justify="left", header_style="bold")
    columns = [
        (frame.columns[i], types[i], w, frame.dtypes[i].is_numeric())
        for i, w in zip(shown, widths, strict=True)
    ]
    if gap is not None:
        columns.insert(gap, (ELIDED, "", 1, False))
    for name, kind, w, numeric in columns:
        header = Text(name)
        header.append("\n" + kind, style="dim")
        grid.add_column(
            header,
            width=w,
            no_wrap=True,
            overflow="ellipsis",
            justify="right" if numeric else "left",
        )
    picks = list(shown)
    if gap is not None:
        picks.insert(gap, None)
    for row in cells:
        if row is None:
            grid.add_row(*(Text(ELIDED_ROW, justify="center") for _ in picks))
        else:
            grid.add_row(*(Text(ELIDED if i is None else row[i]) for i in picks))
    return Group(grid, *footer(frame, cut_rows, len(rows) - cut_rows, len(shown)))


def footer(frame: pl.DataFrame, cut_rows: bool, rows_shown: int, columns_shown: int) -> list:
    """The line under a table: how many rows and columns, and how many shown, when some
    were left out (or there were none)."""
    cut_columns = columns_shown < frame.width
    if not (cut_rows or cut_columns or frame.height == 0):
        return []
    line = f"{frame.height:,} row{'s' if frame.height != 1 else ''}"
    if cut_rows:
        line += f" ({rows_shown:,} shown)"
    if cut_columns:
        line += f"  {frame.width} columns ({columns_shown} shown)"
    return [Text(line)]
