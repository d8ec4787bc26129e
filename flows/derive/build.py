"""The derived tables: each paper's neighbour lists, topics and map place computed here, and
every table of sql/ built from them in DuckDB, in the order flows/core/tables.py gives."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import duckdb
import numpy as np
import polars as pl

from flows.core import tables
from flows.core.held import HELD_BACK, IN_FRAME, Texts
from flows.core.lake import bounded, read_sql, stage_frames
from flows.core.run_record import run_logger
from flows.core.settings import Settings
from flows.core.tables import derived_tables, sql_tables
from flows.derive import map as projection
from flows.derive.duplicates import LIST_FRAMES, list_frames
from flows.derive.mentions import stage_vocabulary
from flows.derive.neighbour_lists import list_width, search_lists
from flows.derive.neighbours import candidates, vectors_of
from flows.derive.paper_rows import PER_PAPER_TABLES, PaperRows
from flows.derive.terms import TOPIC_TERMS, count_topic_terms, stopwords
from flows.derive.topics import cluster_topics

# Tables built by sql/<name>.sql, in dependency order (flows/core/tables.py).
SQL_TABLES = tuple(sql_tables())
# What the SQL reads besides the published tables: dropped once they are built.
SCRATCH = (*LIST_FRAMES, "topic_centroids", "stopwords", "mention_vocabulary", "term_counts",
           "paper_digests")  # fmt: skip
# What the stage's DuckDB holds of its tables and queries; the rest is spilled to disk.
DERIVE_MEMORY = "1GB"
# The papers' texts: the SQL that reads abstracts reads them from the frame (`PaperRows`),
# or where the run holds them back (flows/core/held.py), through its `Texts`.
TEXTS = [*HELD_BACK, *HELD_BACK.values()]


class LastVersion(Protocol):
    """What the stage carries over from the latest version (publish.Previous is one)."""

    centroids: dict[int, Any]  # topic id -> centroid
    assignments: pl.DataFrame  # each paper's topic: paper_id, topic_id
    coordinates: pl.DataFrame  # each paper's place on the map: paper_id, x, y


def derive_tables(
    inputs: dict[str, pl.DataFrame],
    embeddings: pl.DataFrame,
    settings: Settings,
    model_key: str,
    last: LastVersion,
    rows_task: Any = None,
    texts: Texts = IN_FRAME,
) -> dict[str, pl.DataFrame]:
    """Neighbours, near-duplicates, topics, mentions and stats, built in DuckDB from sql/:
    each table of `derived_tables()`.

    Args:
        inputs: ingest's tables (sources, papers with their abstracts, paper_sources, ...).
        embeddings: each paper's vector (paper_id, embedding).
        model_key: names the vectors (model, weights, precision): the last run's neighbour
            lists are updated only for vectors of the same model.
        last: what the latest version holds: its topics and map carry over.
        rows_task: the Prefect task that searches a range of rows on a worker
            (`search_rows`), used where the flow runs on a Dask cluster.
        texts: where the abstracts are read back, where the papers hold them back.
    """
    con = bounded(settings.cache_path / "spill", DERIVE_MEMORY)
    try:
        # The abstracts stay out of DuckDB's papers (the SQL that reads them reads
        # `inputs["papers"]`, through `texts`), and no SQL of sql/ reads the raw abstracts.
        stage_frames(con, inputs | {"papers": inputs["papers"].drop(TEXTS, strict=False)})
        search = partial(search_lists, settings=settings, model_key=model_key,
                         rows_task=rows_task)  # fmt: skip
        build_tables(con, inputs["papers"], embeddings, settings, last, search,
                     run_logger().info, settings.cache_path / "paper_rows", texts)  # fmt: skip
        return {name: con.table(name).pl() for name in derived_tables()}
    finally:
        con.close()


def build_tables(
    con: duckdb.DuckDBPyConnection,
    papers: pl.DataFrame,
    embeddings: pl.DataFrame,
    settings: Settings,
    last: LastVersion | None = None,
    search: Callable[[list[str], np.ndarray], pl.DataFrame] | None = None,
    say: Callable[[str], object] | None = None,
    cache: Path | None = None,
    texts: Texts = IN_FRAME,
) -> dict[str, int]:
    """Build the derived tables in `con` (which already holds papers, sources, paper_sources).

    `papers` is the papers with their abstracts or their hashes: the SQL that reads
    abstracts reads them there (through `texts`), so the papers table of `con` may leave
    them out. `settings` gives k, the
    duplicate threshold and group size, the neighbour method and the topics' count, seed
    and refit.

    Args:
        last: the latest version's topics and map, carried over (none without it).
        search: finds each paper's candidate lists (`candidates`) of (ids, vectors) another
            way (`search_lists`: by updating the last run's lists, or on a cluster's
            workers); without it, `candidates` searches here.
        say: where to tell what was done with the topics and the map (the run's log).
        cache: a folder where the rows derived from each paper alone (mentions, the words
            of topic terms) are kept between runs (`PaperRows`), so that only new papers
            are read, and the counts of topic terms (`TermCounts`), so that only papers
            that changed are counted; without it, every paper is read each time.
        texts: where the abstracts of `papers` are read back, where they hold them back.

    Returns:
        row count per table built.
    """
    ids = papers["paper_id"].sort().to_list()
    vectors = vectors_of(embeddings, pl.Series(ids, dtype=pl.String))
    if search is None:
        found = candidates(ids, vectors, list_width(settings), settings.duplicate_threshold,
                           settings.neighbors_method, settings.exact_neighbors_max)  # fmt: skip
    else:
        found = search(ids, vectors)
    topics, assignments, coordinates = carried(last)
    paper_topics, centroids, topic_note = cluster_topics(
        ids, vectors, settings.n_topics, settings.seed, topics, settings.refit_topics,
        None if assignments is None else assignments["paper_id"], assignments,
    )  # fmt: skip
    coordinates, map_note = projection.paper_coordinates(
        ids, vectors, settings.seed, coordinates, found
    )
    if say:
        say(f"topics: {topic_note}")
        say(f"map: {map_note}")
    lists = list_frames(found, settings.neighbors_k, settings.duplicate_threshold)
    computed = {"paper_topics": paper_topics, "topic_centroids": centroids,
                "stopwords": stopwords(), "paper_coordinates": coordinates}  # fmt: skip
    stage_frames(con, lists | computed)
    set_variables(con, settings)
    stage_vocabulary(con)
    count_topic_terms(con, cache, paper_topics, papers, texts)
    counts = {"paper_topics": paper_topics.height, "paper_coordinates": coordinates.height}
    for table in SQL_TABLES:
        counts[table] = build_table(con, table, cache, papers, texts)
    for scratch in SCRATCH:
        con.execute(f"drop table {scratch}")
    return counts


def carried(
    last: LastVersion | None,
) -> tuple[dict[int, np.ndarray] | None, pl.DataFrame | None, pl.DataFrame | None]:
    """The last version's topics (id -> centroid, float32), each paper's topic and each
    paper's map place; None for each without one."""
    if last is None:
        return None, None, None
    topics = {topic: np.asarray(c, dtype=np.float32) for topic, c in last.centroids.items()}
    return topics, last.assignments, last.coordinates


def set_variables(con: duckdb.DuckDBPyConnection, settings: Settings) -> None:
    """The settings the SQL of sql/ reads, as DuckDB variables."""
    con.execute(f"set variable neighbors_k = {int(settings.neighbors_k)}")
    con.execute(f"set variable duplicate_threshold = {float(settings.duplicate_threshold)}")
    con.execute(f"set variable duplicate_group_max = {int(settings.duplicate_group_max)}")
    con.execute(f"set variable topic_terms = {TOPIC_TERMS}")


def build_table(
    con: duckdb.DuckDBPyConnection,
    table: str,
    cache: Path | None,
    papers: pl.DataFrame,
    texts: Texts = IN_FRAME,
) -> int:
    """Create `table` in `con` from sql/<table>.sql (per paper where it is kept so,
    `PaperRows`); its row count."""
    if table in PER_PAPER_TABLES:
        rows = PaperRows(con, cache, table, PER_PAPER_TABLES[table], papers, texts)
        rows.build(con, table, tables.table(table).keys)
    else:
        con.execute(f"create or replace table {table} as {read_sql(table)}")
    return con.execute(f"select count(*) from {table}").fetchone()[0]
