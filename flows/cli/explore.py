"""Commands that read a version's papers: query (SQL), search (words and meaning), similar."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.options import FormatOpt, MaxRowsOpt, VersionOpt, setting_options
from flows.cli.output import MAX_ROWS, Format, fail, print_frame
from flows.lake import WarehouseError, open_lake
from flows.settings import Settings


class Mode(StrEnum):
    hybrid = "hybrid"
    dense = "dense"
    keyword = "keyword"


@setting_options("warehouse", "catalog", "data_path")
def query(
    sql: Annotated[str | None, typer.Argument(help="SQL over the version's tables.")] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Read the SQL from this file.")
    ] = None,
    fmt: FormatOpt = Format.table,
    max_rows: MaxRowsOpt = MAX_ROWS,
    version: VersionOpt = None,
    *,
    settings: Settings,
) -> None:
    """Run SQL with a version's tables in scope (papers, embeddings, topics, ...).

    Only statements that read run (SELECT, WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN);
    anything that could change the warehouse is refused before it runs.
    """
    import duckdb

    from flows.lake import read_only_query

    if (sql is None) == (file is None):
        fail("give the SQL as an argument or with --file, not both")
    if file is not None:
        if not file.is_file():
            fail(f"no SQL file {file}")
        sql = file.read_text()
    try:
        checked = read_only_query(sql)
        with open_lake(settings, version) as con:
            frame = con.execute(checked).pl()
    except WarehouseError as exc:
        fail(str(exc))
    except duckdb.Error as exc:
        fail(f"query failed: {exc}")
    print_frame(frame, fmt, max_rows)


@setting_options("warehouse", "catalog", "data_path", "model")
def search(
    text: Annotated[str, typer.Argument(help="What to look for, in words.")],
    k: Annotated[int, typer.Option("-k", help="Number of hits.", min=1)] = 10,
    mode: Annotated[
        Mode, typer.Option(help="hybrid (BM25 + dense), dense or keyword.")
    ] = Mode.hybrid,
    venue: Annotated[str | None, typer.Option(help="Only papers of this venue.")] = None,
    year: Annotated[int | None, typer.Option(help="Only papers of this year.")] = None,
    fusion: Annotated[
        str, typer.Option(help="How hybrid mode fuses: score (scaled scores) or rrf.")
    ] = "score",
    fmt: FormatOpt = Format.table,
    max_rows: MaxRowsOpt = MAX_ROWS,
    version: VersionOpt = None,
    *,
    settings: Settings,
) -> None:
    """Search the papers of a version by meaning and by words."""
    from flows.search import search as run_search

    try:
        with open_lake(settings, version) as con:
            hits = run_search(
                con, text, settings, k=k, mode=mode.value, venue=venue, year=year, fusion=fusion
            )
    except (WarehouseError, ValueError) as exc:
        fail(str(exc))
    print_frame(hits, fmt, max_rows)


@setting_options("warehouse", "catalog", "data_path")
def similar(
    paper_id: Annotated[str, typer.Argument(help="A paper id of the version.")],
    k: Annotated[int, typer.Option("-k", help="Number of hits.", min=1)] = 10,
    fmt: FormatOpt = Format.table,
    max_rows: MaxRowsOpt = MAX_ROWS,
    version: VersionOpt = None,
    *,
    settings: Settings,
) -> None:
    """The papers closest in meaning to a given paper."""
    from flows.search import similar as run_similar

    try:
        with open_lake(settings, version) as con:
            hits = run_similar(con, paper_id, k)
    except (WarehouseError, ValueError) as exc:
        fail(str(exc))
    print_frame(hits, fmt, max_rows)
