"""Commands about versions: versions (the list), diff (what changed), checksum (content)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from flows.cli.options import FormatOpt, MaxRowsOpt, VersionOpt, setting_options
from flows.cli.output import MAX_ROWS, Format, as_text, fail, out, print_frame
from flows.core.errors import WarehouseError
from flows.core.settings import Settings

if TYPE_CHECKING:
    import polars as pl


@setting_options("warehouse", "catalog", "data_path")
def versions(
    fmt: FormatOpt = Format.table, max_rows: MaxRowsOpt = MAX_ROWS, *, settings: Settings
) -> None:
    """One line per published version: version, time, summary."""
    from flows.core.lake import open_lake, read_sql

    try:
        with open_lake(settings, extensions=()) as con:
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
    """What changed between two versions: papers, their metadata and sources, venues,
    topics, near-duplicates.

    Papers are named by id and title (an untitled paper by its abstract's first words; a
    removed paper as the older version had it). Metadata lists, per kept paper, each of
    title, venue, year, authors, external id and links that now reads differently; sources
    the records a kept paper gained or lost. json gives one object (counts and the lists);
    csv one table, its first column naming the list each row belongs to; jsonl one object
    per row with that name; markdown the tables under headings.
    """
    import polars as pl

    from flows.publish import diff_versions

    try:
        change = diff_versions(settings, version_a, version_b)
    except WarehouseError as exc:
        fail(str(exc))
    counts = change.counts()
    parts = {
        "papers": change.papers,
        "metadata": change.metadata,
        "sources": change.sources,
        "groups": change.groups,
        "new_duplicates": change.new_duplicates,
    }
    headline = (
        f"version {version_a} -> {version_b}: papers +{counts['added']} added, "
        f"-{counts['removed']} removed, ~{counts['changed']} changed; new metadata: "
        f"{counts['metadata_changed']}, new sources: {counts['sources_changed']}"
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
            print_frame(paper_lines(change.papers), fmt, max_rows, title="papers")
        if change.metadata.height:
            print_frame(change.metadata, fmt, max_rows, title="metadata", by_importance=True)
        if change.sources.height:
            print_frame(change.sources, fmt, max_rows, title="sources", by_importance=True)
        print_frame(change.groups, fmt, max_rows, title="papers per venue and topic")
        out.print(f"new near-duplicate pairs: {change.new_duplicates.height}")
        if change.new_duplicates.height:
            print_frame(pair_lines(change.new_duplicates), fmt, max_rows)


def paper_lines(papers: pl.DataFrame) -> pl.DataFrame:
    """Changed papers for people: change, the paper's id (the newer one of a changed paper)
    and title, and the older id only where a paper changed, so the title has the room."""
    import polars as pl

    lines = papers.select(
        "change", pl.coalesce("new_id", "old_id").alias("paper_id"), "title", "old_id"
    )
    if not (papers["change"] == "changed").any():
        return lines.drop("old_id")
    return lines.with_columns(pl.when(pl.col("change") == "changed").then("old_id").alias("old_id"))


def pair_lines(pairs: pl.DataFrame) -> pl.DataFrame:
    """Near-duplicate pairs for people: a line per paper (id and title) under its pair's
    number and score, so two titles fit a terminal; files and lines are in the other formats."""
    import polars as pl

    numbered = pairs.with_row_index("pair", offset=1).with_columns(
        pl.col("score").cast(pl.Float64).round(4)
    )
    sides = [
        numbered.select(
            "pair",
            "score",
            pl.col(f"paper_{s}").alias("paper_id"),
            pl.col(f"title_{s}").alias("title"),
        )
        for s in ("a", "b")
    ]
    return pl.concat(sides).sort("pair", maintain_order=True)


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

    from flows.publish import checksums

    try:
        number, tables, whole = checksums(settings, version)
    except WarehouseError as exc:
        fail(str(exc))
    frame = pl.DataFrame({"table": [*tables, "(version)"], "checksum": [*tables.values(), whole]})
    if fmt == Format.table:
        out.print(f"version {number}")
    print_frame(frame, fmt, max_rows)


@setting_options("warehouse", "catalog", "data_path")
def compact(
    keep_files: Annotated[
        bool,
        typer.Option(
            "--keep-files",
            help="Leave the files no version reads any more on disk (a query running now "
            "may be reading them); a later compact removes them.",
        ),
    ] = False,
    *,
    settings: Settings,
) -> None:
    """Merge each table's small files, one or more a run, so that reading a table opens a
    few files however many versions the warehouse holds. Every version reads as before."""
    import polars as pl

    from flows.publish import compact as compact_lake

    try:
        done = compact_lake(settings, remove_files=not keep_files)
    except WarehouseError as exc:
        fail(str(exc))
    frame = pl.DataFrame(
        {
            "table": list(done.files_before),
            "files before": list(done.files_before.values()),
            "files after": [done.files_after.get(t, 0) for t in done.files_before],
        }
    )
    print_frame(frame, Format.table, 0)
    before, after = sum(done.files_before.values()), sum(done.files_after.values())
    out.print(
        f"compacted {settings.warehouse} at version {done.version}: {before} live files "
        f"became {after}; {done.removed} files no version reads were removed",
        highlight=False,
    )


def tables(
    name: Annotated[
        str | None, typer.Argument(help="A table: list its columns, what it reads and refers to.")
    ] = None,
    fmt: FormatOpt = Format.table,
    max_rows: MaxRowsOpt = MAX_ROWS,
) -> None:
    """The tables a run publishes: key and what each holds; with NAME, its grain and columns."""
    import polars as pl

    from flows.core import tables as registry

    if name is None:
        rows = [
            {
                "table": t.name,
                "key": ", ".join(t.keys) or "(a row per run)",
                "description": t.description,
            }
            for t in registry.registry()
        ]
        print_frame(pl.DataFrame(rows), fmt, max_rows)
        return
    try:
        table = registry.table(name)
    except KeyError:
        fail(f"no table {name!r}; `paperlake tables` lists them")
    refers = dict(table.references)
    rows = [
        {"column": column, "holds": holds, "refers to": refers.get(column, "")}
        for column, holds in table.columns
    ]
    out.print(f"{table.name}: {table.description}", highlight=False)
    out.print(
        f"grain: {table.grain.rstrip('.')}; key: {', '.join(table.keys) or '-'}", highlight=False
    )
    if table.reads:
        out.print(f"reads: {', '.join(table.reads)} (sql/{table.name}.sql)", highlight=False)
    print_frame(pl.DataFrame(rows), fmt, max_rows)
