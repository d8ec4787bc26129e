"""Commands that read a version's papers: query (SQL), search (words and meaning), similar."""

from __future__ import annotations

import io
import urllib.parse
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


Found = tuple["pl.DataFrame", str | None]  # a search's hits, and the no-good-match line


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
    asked = {
        "q": text, "version": version, "k": k, "mode": mode.value, "venue": venue,
        "year": year, "topic": topic, "fusion": fusion, "min_cosine": min_cosine,
    }  # fmt: skip
    found = searched_by_explorer(settings, asked)
    hits, weak = found if found is not None else searched_here(settings, asked)
    print_hits(hits, fmt, max_rows)
    if weak:
        # After a table, for the reader; beside machine formats, on stderr (the rows
        # carry it as good_match).
        (out if fmt == Format.table else err).print(weak, highlight=False)


def searched_by_explorer(settings: Settings, asked: dict) -> Found | None:
    """The hits and the no-good-match line of a running explorer of the warehouse
    (flows/core/explorers.py), which holds the version and the model in memory: the fast
    path. None where none runs, or it did not answer or failed: the search runs here."""
    from flows.core import explorers

    url = explorers.running(settings)
    answer = explorers.ask(url, "api/hits", asked) if url else None
    if answer is None or answer.status >= 500:
        return None
    if answer.status != 200:  # the explorer refused the search as this process would
        fail(answer.error())
    import polars as pl

    weak = urllib.parse.unquote(answer.headers.get("paperlake-no-good-match", ""))
    return pl.read_ipc(io.BytesIO(answer.body)), weak or None


def searched_here(settings: Settings, asked: dict) -> Found:
    """The hits and the no-good-match line of a search run in this process."""
    from flows.core.lake import open_lake
    from flows.read import MIN_COSINE, no_good_match, search_papers, unmatched_topic

    given = asked["min_cosine"]
    threshold, topic = MIN_COSINE if given is None else given, asked["topic"]
    unknown = None
    try:
        with open_lake(settings, asked["version"], ("fts",)) as con:
            # A topic filter that names no topic is said so, not answered with no rows.
            unknown = topic is not None and unmatched_topic(con, topic)
            if not unknown:
                hits = search_papers(
                    con, asked["q"], settings, k=asked["k"], mode=asked["mode"],
                    venue=asked["venue"], year=asked["year"], fusion=asked["fusion"],
                    topic=topic, min_cosine=threshold,
                )  # fmt: skip
    except (WarehouseError, ValueError, RuntimeError) as exc:
        fail(str(exc))
    if unknown:
        fail(unknown)
    return hits, no_good_match(hits, threshold)


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
        with open_lake(settings, version, ("fts",)) as con:
            hits = similar_papers(con, paper_id, k)
    except (WarehouseError, ValueError) as exc:
        fail(str(exc))
    print_hits(hits, fmt, max_rows)
