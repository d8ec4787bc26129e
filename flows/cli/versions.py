"""Commands about versions: versions (the list), diff (what changed), checksum (content)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from flows.cli.options import FormatOpt, MaxRowsOpt, VersionOpt, setting_options
from flows.cli.output import MAX_ROWS, Format, as_text, fail, out, print_frame
from flows.lake import WarehouseError, open_lake, read_sql
from flows.settings import Settings


@setting_options("warehouse", "catalog", "data_path")
def versions(
    fmt: FormatOpt = Format.table, max_rows: MaxRowsOpt = MAX_ROWS, *, settings: Settings
) -> None:
    """One line per published version: version, time, summary."""
    try:
        with open_lake(settings) as con:
            frame = con.execute(read_sql("catalog/versions")).pl()
    except WarehouseError as exc:
        fail(str(exc))
    print_frame(frame, fmt, max_rows)


@setting_options("warehouse", "catalog", "data_path")
def diff(
    version_a: Annotated[int, typer.Argument(help="Older version.")],
    version_b: Annotated[int, typer.Argument(help="Newer version.")],
    fmt: FormatOpt = Format.table,
    max_rows: MaxRowsOpt = MAX_ROWS,
    *,
    settings: Settings,
) -> None:
    """What changed between two versions: papers, venues, topics, near-duplicates.

    json gives one object (counts and the three lists); csv one table, its first column
    naming the list each row belongs to; jsonl one object per row with that name;
    markdown the three tables under headings.
    """
    import polars as pl

    from flows import history

    try:
        change = history.diff(settings, version_a, version_b)
    except WarehouseError as exc:
        fail(str(exc))
    counts = change.counts()
    parts = {
        "papers": change.papers,
        "groups": change.groups,
        "new_duplicates": change.new_duplicates,
    }
    headline = (
        f"version {version_a} -> {version_b}: papers +{counts['added']} added, "
        f"-{counts['removed']} removed, ~{counts['changed']} changed"
    )
    if fmt == Format.json:
        payload = {
            "version_a": version_a,
            "version_b": version_b,
            **counts,
            **{name: frame.to_dicts() for name, frame in parts.items()},
        }
        sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
    elif fmt in (Format.csv, Format.jsonl):
        named = [
            frame.select(pl.lit(name).alias("list"), pl.all()) for name, frame in parts.items()
        ]
        if fmt == Format.csv:
            sys.stdout.write(as_text(pl.concat(named, how="diagonal_relaxed"), fmt))
        else:
            sys.stdout.write("".join(as_text(frame, fmt) for frame in named))
    elif fmt == Format.markdown:
        sections = [f"## {name}\n\n{as_text(frame, fmt)}" for name, frame in parts.items()]
        sys.stdout.write(f"{headline}\n\n" + "\n".join(sections))
    else:
        out.print(headline, highlight=False)
        if change.papers.height:
            print_frame(change.papers, fmt, max_rows, title="papers")
        print_frame(change.groups, fmt, max_rows, title="papers per venue and topic")
        out.print(f"new near-duplicate pairs: {change.new_duplicates.height}")
        if change.new_duplicates.height:
            print_frame(change.new_duplicates, fmt, max_rows)


@setting_options("warehouse", "catalog", "data_path")
def checksum(
    version: VersionOpt = None,
    fmt: FormatOpt = Format.table,
    max_rows: MaxRowsOpt = MAX_ROWS,
    *,
    settings: Settings,
) -> None:
    """Order-independent content checksums of a version: per table and for the whole."""
    import polars as pl

    from flows import history

    try:
        number, tables, whole = history.checksums(settings, version)
    except WarehouseError as exc:
        fail(str(exc))
    frame = pl.DataFrame({"table": [*tables, "(version)"], "checksum": [*tables.values(), whole]})
    if fmt == Format.table:
        out.print(f"version {number}")
    print_frame(frame, fmt, max_rows)
