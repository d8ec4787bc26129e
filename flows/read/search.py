"""Search a published version: dense (embeddings), keyword (BM25) and hybrid (both fused).

Hits are ranked by the fusion (ranking.py), and each carries what a person reads to judge
it (hits.py): `score`, the cosine of the query's vector and the paper's (the same scale
for every query, so a weak best hit says the corpus has nothing close), and `bm25`, the
keyword score. Queries are encoded without torch (the embed stage's `encode_queries`). A
search reads what it needs of a version once (`Corpus`); a long-lived process keeps that
in memory between searches.
"""

from __future__ import annotations

import contextlib
import functools
import json
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from flows.core.lake import LAKE, connect, read_sql
from flows.core.settings import PACKAGED_MODEL, Settings
from flows.read.hits import HITS_SCHEMA, MIN_COSINE, MIN_COSINE_WORDS, hits, ranked_hits
from flows.read.postings import PostingsFile, asked_terms, held_postings
from flows.read.ranking import (
    dense_ranking,
    filtered,
    fuse,
    holding_every_word,
    keyword_scores,
    of_topic,
)
from flows.read.search_index import (
    current_version,
    keyword_index,
    keyword_scope,
    postings_folder,
    vectors_folder,
)
from flows.read.vectors import MatrixVectors, held_vectors

MODES = ("hybrid", "dense", "keyword")
CANDIDATES = 100  # hits each retriever hands to the fusion
CARDS_ASKED = 1_000  # the most cards a held corpus is asked for at once
# What DuckDB may hold of a held corpus's keyword index (its words) and cards: its
# postings are read from arrays (`PostingsFile`), not through DuckDB's blocks.
HELD_MEMORY = "256MB"


def version_model(con: duckdb.DuckDBPyConnection) -> str:
    """The model id the attached version's embeddings were made with."""
    row = con.execute("select any_value(model) from embeddings").fetchone()
    if row is None or row[0] is None:
        raise ValueError("this version has no embeddings")
    return row[0]


def recorded_model(con: duckdb.DuckDBPyConnection) -> str | None:
    """The `model` setting the attached version was built with, from its commit's manifest:
    the packaged model's name or the absolute path of a local folder (a relative one in
    versions published before settings resolved it)."""
    row = con.execute(
        f"select commit_extra_info from {LAKE}.snapshots() where snapshot_id = ?",
        [current_version(con)],
    ).fetchone()
    return json.loads(row[0]).get("config", {}).get("model") if row and row[0] else None


def query_model(model_id: str, settings: Settings, recorded: str | None = None) -> str:
    """The local model that embeds queries for vectors made by `model_id`: the packaged one;
    else a folder given (an option, the environment, a settings file); else the folder the
    version was embedded with (`recorded`), where it still is."""
    if model_id.endswith(f"/{PACKAGED_MODEL}"):
        return PACKAGED_MODEL
    if settings.model_given and settings.model != PACKAGED_MODEL:
        return settings.model
    if recorded and Path(recorded).expanduser().is_dir():
        return recorded
    where = f" from {recorded}, which is not here" if recorded else ""
    raise ValueError(
        f"this version was embedded with {model_id}{where}; pass --model with its local folder"
    )


class Corpus:
    """What a search reads of one version: the embeddings (`vectors`), the fields filters
    read, and the version's keyword index attached once.

    Every query of a DuckLake table reads the catalog first, so a
    search reads each table once, not once per step. A search command reads a corpus
    for its one search (`search_papers`): the embeddings as one matrix in memory, the
    hits' cards from the version. A long-lived process (the explorer) keeps one per
    version, `held`: the keyword index gets a connection of its own, and the cards (kept in
    the index file) and the vectors (`VectorFile`) are read from disk beside it, so the
    corpus answers searches after `con` is closed (the explorer reads a copy of the
    catalog, so that runs can publish) and holds few bytes a paper in memory.

    Close it (or use it as a context manager) to let the keyword index go.
    """

    def __init__(
        self, con: duckdb.DuckDBPyConnection, settings: Settings, held: bool = False
    ) -> None:
        self.settings = settings
        self.held = held
        self.version = current_version(con)
        index = keyword_index(con, settings)
        self.con: duckdb.DuckDBPyConnection | None = con
        self.resources = contextlib.ExitStack()
        try:
            # A cursor shares `con`'s database (its extensions: none to load), with its own
            # `use`; a held corpus's index needs a database that outlives `con`.
            self.keyword = connect(extensions=("fts",)) if held else con.cursor()
            self.resources.callback(self.keyword.close)
            self.resources.enter_context(keyword_scope(self.keyword, index))
            if held:
                # Hits' cards are found through the index on their ids (kept_cards.sql) where
                # DuckDB hands the ids to the scan as a filter: by default for up to 50 ids, so
                # a search of 100 hits read every card.
                self.keyword.execute(f"set dynamic_or_filter_threshold = {CARDS_ASKED}")
                # DuckDB keeps the blocks it read of the index file up to its memory limit
                # (most of the machine's by default): a long-lived process bounds it.
                self.keyword.execute(f"set memory_limit = '{HELD_MEMORY}'")
                # Read now: `con` may be gone when they are used.
                _ = self.model, self.recorded_model, self.vectors, self.facets, self.postings
                self.con = None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        with contextlib.suppress(duckdb.Error):  # `con` (the cursor's database) closed first
            self.resources.close()

    def __enter__(self) -> Corpus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lake(self) -> duckdb.DuckDBPyConnection:
        assert self.con is not None, "a held corpus read everything up front"
        return self.con

    @functools.cached_property
    def model(self) -> str | None:
        """The model id of the version's embeddings; None when it has none."""
        try:
            return version_model(self.lake())
        except ValueError:
            return None

    @functools.cached_property
    def recorded_model(self) -> str | None:
        """The `model` setting the version was built with (`recorded_model`)."""
        return recorded_model(self.lake())

    @functools.cached_property
    def vectors(self) -> MatrixVectors:
        """The embedded papers' vectors: in memory for one search; for a held corpus, the
        version's vector file beside its keyword index (`VectorFile`)."""
        if self.held:
            return held_vectors(self.lake(), vectors_folder(self.settings, self.version))
        return MatrixVectors.of(self.lake())

    @functools.cached_property
    def facets(self) -> pl.DataFrame:
        """Each paper's venue, year and topic, which filters read; the venue and the topic's
        label as categories (a label is the same text for every paper of its topic)."""
        facets = self.lake().execute(read_sql("search/facets")).pl()
        return facets.with_columns(pl.col("venue", "topic").cast(pl.Categorical))

    @functools.cached_property
    def postings(self) -> PostingsFile | None:
        """For a held corpus, the keyword index's postings as arrays beside it, which score
        a query in memory (`PostingsFile`); None for one search, which reads them in SQL."""
        if self.held:
            return held_postings(self.keyword, postings_folder(self.settings, self.version))
        return None

    def keyword_scores(
        self, text: str, k: int, ids: list[str] | None = None
    ) -> list[tuple[str, float]]:
        """The k papers (of `ids`; None for all) of best BM25 for `text`, best first."""
        if self.postings is None:
            return keyword_scores(self.keyword, text, k, ids)
        termids, _ = asked_terms(self.keyword, text)
        return self.postings.scores(termids, k, ids)

    def holding_every_word(self, text: str, ids: list[str]) -> set[str]:
        """Those of `ids` that hold every term of `text` (its stop words left out)."""
        if self.postings is None or not ids:
            return holding_every_word(self.keyword, text, ids)
        [(terms,)] = self.keyword.execute(read_sql("search/terms"), {"text": text}).fetchall()
        return self.postings.holding_all(*asked_terms(self.keyword, terms), ids)

    def cards(self, ids: list[str]) -> pl.DataFrame:
        if self.held:
            return self.keyword.execute(read_sql("search/kept_cards"), {"ids": ids}).pl()
        return self.lake().execute(read_sql("search/cards"), {"ids": ids}).pl()

    def listing(self, ids: list[str]) -> pl.DataFrame:
        """The papers of `ids`, in that order, as `hits` gives them without a query."""
        return ranked_hits(self.cards(ids), [(pid, 0.0) for pid in ids])

    def encode(self, text: str) -> np.ndarray:
        """The query's unit vector by the model of the version's embeddings (no torch:
        see flows/embed/query.py)."""
        # Imported here: only a search by meaning encodes, and `paperlake query` and
        # `report` import this stage's face too.
        from flows.embed import encode_queries

        if self.model is None:
            raise ValueError("this version has no embeddings")
        model = query_model(self.model, self.settings, self.recorded_model)
        return encode_queries([text], model)[0]

    def search(
        self,
        text: str,
        k: int = 10,
        mode: str = "hybrid",
        venue: str | None = None,
        year: int | None = None,
        fusion: str = "score",
        topic: int | str | None = None,
        min_cosine: float = MIN_COSINE,
        min_cosine_words: float = MIN_COSINE_WORDS,
    ) -> pl.DataFrame:
        """As `search_papers`, on this corpus."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        pool = max(CANDIDATES, 5 * k)
        # The facets are read only when a filter asks for them.
        given = venue is not None or year is not None or topic is not None
        ids = filtered(self.facets, venue, year, topic) if given else None
        if ids == []:
            return pl.DataFrame(schema=HITS_SCHEMA)
        # The keyword ranking runs before the query is encoded: ONNX Runtime's threads spin
        # a while after a run, which slows DuckDB right after it.
        keyword = self.keyword_scores(text, pool, ids) if mode != "dense" else []
        rankings = [keyword] if mode == "keyword" else []
        query = None
        if mode in ("dense", "hybrid"):
            vectors = self.vectors  # read while the encoder may still load
            query = self.encode(text)
            rows = None if ids is None else vectors.rows_of(ids)
            rankings.append(vectors.ranking(query, pool, rows))
        if mode == "hybrid":
            rankings.append(keyword)
        ranked = (fuse(rankings, pool, fusion) if mode == "hybrid" else rankings[0])[:k]
        shown = [pid for pid, _ in ranked]
        cosine = None if query is None else self.vectors.cosine_of(shown, query)
        return ranked_hits(
            self.cards(shown), ranked, cosine, dict(keyword),
            self.holding_every_word(text, shown),
            min_cosine=min_cosine, min_cosine_words=min_cosine_words,
        )  # fmt: skip


def search_papers(
    con: duckdb.DuckDBPyConnection,
    text: str,
    settings: Settings,
    k: int = 10,
    mode: str = "hybrid",
    venue: str | None = None,
    year: int | None = None,
    fusion: str = "score",
    topic: int | str | None = None,
    min_cosine: float = MIN_COSINE,
    min_cosine_words: float = MIN_COSINE_WORDS,
) -> pl.DataFrame:
    """The k best papers for `text`: dense, keyword, or both fused (see `fuse`).

    Args:
        venue, year: only papers of this venue (case ignored) and year.
        topic: only papers of this topic: its id, or words of its label.
        min_cosine, min_cosine_words: the least `score` of a good match, and of one that
            holds every word of the query (see `hits`).

    Returns:
        the hits as `hits` gives them; in keyword mode without score.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    with Corpus(con, settings) as corpus:
        return corpus.search(
            text, k, mode, venue, year, fusion, topic, min_cosine, min_cosine_words
        )


TOPICS_NAMED = 12  # topics a line names where a topic filter matches none


def unmatched_topic(con: duckdb.DuckDBPyConnection, topic: int | str) -> str | None:
    """A line saying that `topic` (an id, or words of a label) names no topic of the
    attached version, and which topics there are; None where one matches."""
    topics = con.execute("select topic_id, label from topics order by topic_id").pl()
    if topics.filter(of_topic(topic, "label")).height:
        return None
    if topics.height == 0:
        return f"no topic matches {str(topic)!r}: this version has no topics"
    if topics.height <= TOPICS_NAMED:
        named = "; ".join(f"{i} {label}" for i, label in topics.iter_rows())
        return f"no topic matches {str(topic)!r}; give an id or words of a label: {named}"
    return (
        f"no topic matches {str(topic)!r}; paperlake query 'select topic_id, label from "
        f"topics' lists the {topics.height} topics"
    )


def dense_search(
    con: duckdb.DuckDBPyConnection, text: str, k: int, settings: Settings
) -> pl.DataFrame:
    """The k papers closest in meaning to `text`."""
    return search_papers(con, text, settings, k=k, mode="dense")


def similar_papers(con: duckdb.DuckDBPyConnection, paper_id: str, k: int = 10) -> pl.DataFrame:
    """The k papers closest to a published paper, by its own embedding (columns as `hits`)."""
    row = con.execute("select embedding from embeddings where paper_id = ?", [paper_id]).fetchone()
    if row is None:
        raise ValueError(f"no paper {paper_id} in this version")
    vector = np.asarray(row[0], dtype=np.float32)
    ranked = dense_ranking(con, vector, k, exclude=paper_id)
    return hits(con, ranked, query=vector)
