"""Commands that read a version's papers: query (SQL), search (words and meaning), similar."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flows.cli.options import FormatOpt, MaxRowsOpt, VersionOpt, setting_options
from flows.cli.output import MAX_ROWS, Format, err, fail, out, print_frame
from flows.core.errors import WarehouseError
from flows.core.settings import Settings
from flows.core.stopping import stops_on_signals

if TYPE_CHECKING:
    import polars as pl


class Mode(StrEnum):
    hybrid = "hybrid"
    dense = "dense"
    keyword = "keyword"


@stops_on_signals(note="nothing was changed: a query only reads")
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
    anything that could change the warehouse is refused before it runs, and files outside
    the warehouse's data path cannot be read.
    """
    import duckdb

    from flows.read import run_query

    if (sql is None) == (file is None):
        fail("give the SQL as an argument or with --file, not both")
    if file is not None:
        if not file.is_file():
            fail(f"no SQL file {file}")
        sql = file.read_text()
    try:
        frame = run_query(settings, sql, version)
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
    topic: Annotated[
        str | None, typer.Option(help="Only papers of this topic: its id or words of its label.")
    ] = None,
    fusion: Annotated[
        str, typer.Option(help="How hybrid mode ranks: score (scaled scores) or rrf.")
    ] = "score",
    min_cosine: Annotated[
        float | None,
        typer.Option(help="Least score (cosine) of a good match [default: measured, see README]."),
    ] = None,
    fmt: FormatOpt = Format.table,
    max_rows: MaxRowsOpt = MAX_ROWS,
    version: VersionOpt = None,
    *,
    settings: Settings,
) -> None:
    """Search the papers of a version by meaning and by words.

    Each hit has its authors, venue, year, topic, a link, score (the cosine of the query
    and the paper: the same scale for every query) and bm25 (the keyword score). When even
    the best hit is below the least cosine of a good match, a line says so.
    """
    from flows.core.lake import open_lake
    from flows.read import MIN_COSINE, no_good_match, search_papers, unmatched_topic

    threshold = MIN_COSINE if min_cosine is None else min_cosine
    unknown = None
    try:
        with without_pandas(), open_lake(settings, version, ("fts",)) as con:
            # A topic filter that names no topic is said so, not answered with no rows.
            unknown = topic is not None and unmatched_topic(con, topic)
            if not unknown:
                hits = search_papers(
                    con, text, settings, k=k, mode=mode.value, venue=venue, year=year,
                    fusion=fusion, topic=topic, min_cosine=threshold,
                )  # fmt: skip
    except (WarehouseError, ValueError, RuntimeError) as exc:
        fail(str(exc))
    if unknown:
        fail(unknown)
    print_hits(hits, fmt, max_rows)
    if weak := no_good_match(hits, threshold):
        # After a table, for the reader; beside machine formats, on stderr (the rows
        # carry it as good_match).
        (out if fmt == Format.table else err).print(weak, highlight=False)


@contextlib.contextmanager
def without_pandas() -> Iterator[None]:
    """Keep pandas out of this process while a command runs: DuckDB imports it before
    binding any parameter where it is installed (duckdb/duckdb#18658), and nothing a search
    runs needs it.

    Importing it is a sizeable share of a search's start (bench/search_latency.py); an
    entry of None in sys.modules makes `import pandas` fail, and DuckDB binds without it.
    The entry goes when the command ends, for callers in the same process (tests).
    """
    kept_out = "pandas" not in sys.modules
    if kept_out:
        sys.modules["pandas"] = None
    try:
        yield
    finally:
        if kept_out and sys.modules.get("pandas", False) is None:
            del sys.modules["pandas"]


TITLE_WORDS = 12  # an untitled paper is shown by its abstract's first words
TABLE_AUTHORS = 3  # authors a table names before "et al."


def print_hits(hits: pl.DataFrame, fmt: Format, max_rows: int) -> None:
    """Hits as a table for people (title or the abstract's start, authors in short, no
    abstract), or every field in a machine format."""
    import polars as pl

    if fmt != Format.table:
        print_frame(hits, fmt, max_rows)
        return
    words = pl.col("abstract").str.split(" ")
    start = words.list.head(TITLE_WORDS).list.join(" ") + pl.lit(" …")
    authors = pl.col("authors").list.head(TABLE_AUTHORS).list.join(", ") + pl.when(
        pl.col("authors").list.len() > TABLE_AUTHORS
    ).then(pl.lit(" et al.")).otherwise(pl.lit(""))
    # In order of importance: a narrow terminal keeps the first columns.
    view = hits.select(
        "rank",
        title=pl.when(pl.col("title").is_null() | (pl.col("title") == ""))
        .then(start)
        .otherwise(pl.col("title")),
        score="score",
        venue="venue",
        year="year",
        topic="topic",
        bm25="bm25",
        authors=authors,
        paper_id="paper_id",
        link="link",
    )
    if hits["decision"].is_not_null().any():  # OpenReview exports: after the year
        view = view.insert_column(5, hits["decision"])
    print_frame(view, fmt, max_rows, by_importance=True)


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
    from flows.core.lake import open_lake
    from flows.read import similar_papers

    try:
        with without_pandas(), open_lake(settings, version, ("fts",)) as con:
            hits = similar_papers(con, paper_id, k)
    except (WarehouseError, ValueError) as exc:
        fail(str(exc))
    print_hits(hits, fmt, max_rows)
