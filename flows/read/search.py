"""Search a published version: dense (embeddings), keyword (BM25) and hybrid (both fused).

Hits are ranked by the fusion, and each carries what a person reads to judge it: `score`,
the cosine of the query's vector and the paper's (the same scale for every query, so a
weak best hit says the corpus has nothing close), and `bm25`, the keyword score. Queries
are encoded without torch (flows/embed/query.py). A search reads what it needs of a
version once (`Corpus`); a long-lived process keeps that in memory between searches.
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from flows.core.lake import connect, read_sql
from flows.core.settings import PACKAGED_MODEL, Settings
from flows.read.search_index import (
    current_version,
    keyword_index,
    keyword_scope,
)

MODES = ("hybrid", "dense", "keyword")
FUSIONS = ("score", "rrf")
RRF_K = 60  # the constant of reciprocal rank fusion (Cormack et al., 2009)
CANDIDATES = 100  # hits each retriever hands to the fusion
# A good match: a hit this close in meaning, or one holding every word of the query and
# at least MIN_COSINE_WORDS close. Measured with all-MiniLM-L6-v2 (query vector to the
# paper's title and abstract): of 137 PubMed titles searched among ICLR 2017 abstracts
# (a corpus that has nothing on them) none came as close as 0.5 (99th percentile 0.467),
# while 92% of the ICLR 2017 titles come that close to their own abstract. Short queries
# sit lower: on the 38-paper ICLR 2026 sample "speculative decoding" reaches its paper at
# 0.44 and "chain of thought" at 0.26, both holding every word, while "graph neural
# networks for molecules" (no such paper) tops at 0.41 without the word "molecules".
MIN_COSINE = 0.5
MIN_COSINE_WORDS = 0.25


def version_model(con: duckdb.DuckDBPyConnection) -> str:
    """The model id the attached version's embeddings were made with."""
    row = con.execute("select any_value(model) from embeddings").fetchone()
    if row is None or row[0] is None:
        raise ValueError("this version has no embeddings")
    return row[0]


def query_model(model_id: str, settings: Settings) -> str:
    """The local model that embeds queries for vectors made by `model_id`."""
    if model_id.endswith(f"/{PACKAGED_MODEL}"):
        return PACKAGED_MODEL
    if settings.model != PACKAGED_MODEL:
        return settings.model
    raise ValueError(
        f"this version was embedded with {model_id}; pass --model with its local folder"
    )


def keyword_ranking(
    con: duckdb.DuckDBPyConnection,
    index: Path,
    texts: list[str],
    k: int,
    ids: list[str] | None = None,
) -> list[list[tuple[str, float]]]:
    """For each text, the k best papers by BM25 over the indexed title and abstract.

    Args:
        ids: only these papers; None for all.
    """
    with keyword_scope(con, index):
        return [keyword_scores(con, text, ids)[0][:k] for text in texts]


def keyword_scores(
    con: duckdb.DuckDBPyConnection, text: str, ids: list[str] | None = None
) -> tuple[list[tuple[str, float]], set[str]]:
    """Every paper (of `ids`; None for all) that BM25 scores for `text`, best first, and
    those of them holding every term of it; `con` has the keyword index in use."""
    [(terms,)] = con.execute(read_sql("search/terms"), {"text": text}).fetchall()
    params = {"text": text, "terms": terms, "ids": ids}
    rows = con.execute(read_sql("search/keyword"), params).fetchall()
    return [(pid, score) for pid, score, _ in rows], {pid for pid, _, every in rows if every}


def filtered(
    facets: pl.DataFrame,
    venue: str | None = None,
    year: int | None = None,
    topic: int | str | None = None,
) -> list[str] | None:
    """The papers of `facets` (sql/search/facets.sql) passing the filters given, or None
    when none is given (every paper).

    Args:
        venue: case ignored. topic: a topic id, or words found in its label (case ignored).
    """
    if venue is None and year is None and topic is None:
        return None
    keep = pl.lit(True)
    if venue is not None:
        keep &= pl.col("venue").str.to_lowercase() == venue.lower()
    if year is not None:
        keep &= pl.col("year") == year
    if topic is not None:
        words = str(topic).strip(" ")
        keep &= (pl.col("topic_id").cast(pl.String) == words) | pl.col(
            "topic"
        ).str.to_lowercase().str.contains(words.lower(), literal=True)
    return facets.filter(keep)["paper_id"].to_list()


def dense_ranking(
    con: duckdb.DuckDBPyConnection,
    vector: np.ndarray,
    k: int,
    exclude: str | None = None,
    ids: list[str] | None = None,
) -> list[tuple[str, float]]:
    """The k papers whose embeddings are closest to `vector` (exact cosine), in DuckDB.

    Args:
        exclude: a paper left out (the one whose vector `vector` is).
        ids: the papers to rank; None for all.
    """
    params = {"query": vector.tolist(), "k": k, "ids": ids, "exclude": exclude}
    return con.execute(read_sql("search/dense"), params).fetchall()


def as_matrix(column: pl.Series) -> np.ndarray:
    """An embedding column (FLOAT[dim] or FLOAT[]) as one float32 matrix, a row a paper."""
    if column.dtype == pl.List:
        column = column.list.to_array(int(column.list.len().max() or 0))
    return np.ascontiguousarray(column.to_numpy(), dtype=np.float32)


def norms(vectors: np.ndarray) -> np.ndarray:
    """The length of each row of `vectors`, summed in float64."""
    return np.sqrt(np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64))


def cosines(vectors: np.ndarray, lengths: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine of `query` and each row of `vectors` (whose norms are `lengths`), float64.

    The products are float32 (one BLAS call); their sums differ from DuckDB's
    list_cosine_similarity (float32 too) by a few units in the last place.
    """
    query = np.asarray(query, dtype=np.float32)
    dots = (vectors @ query).astype(np.float64)
    return dots / (lengths * float(np.sqrt(np.einsum("i,i->", query, query, dtype=np.float64))))


def best(scores: np.ndarray, ids: list[str], k: int) -> list[tuple[str, float]]:
    """The k highest of `scores` as (id, score), best first, ties by id."""
    rows = np.arange(len(scores))
    if len(scores) > k:  # only the rows that can be among the k best are sorted
        rows = np.flatnonzero(scores >= np.partition(scores, len(scores) - k)[len(scores) - k])
    order = sorted(rows.tolist(), key=lambda row: (-scores[row], ids[row]))[:k]
    return [(ids[row], float(scores[row])) for row in order]


def fuse(
    rankings: list[list[tuple[str, float]]],
    k: int,
    method: str = "score",
    rrf_k: int = RRF_K,
) -> list[tuple[str, float]]:
    """Fuse ranked lists of (paper_id, score) into one.

    `score`: each list's scores are min-max scaled to [0, 1] and summed with equal
    weights (an id missing from a list gets 0 there). `rrf`: reciprocal rank fusion, each
    list adds 1 / (rrf_k + rank). On ICLR 2017 title -> abstract search
    (bench/search_recall.py) score fusion puts the right abstract first more often than
    RRF, which ignores how far apart the scores are.
    """
    if method not in FUSIONS:
        raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, not {method!r}")
    fused: dict[str, float] = {}
    for ranking in rankings:
        if not ranking:
            continue
        values = [score for _, score in ranking]
        low, high = min(values), max(values)
        for rank, (paper_id, score) in enumerate(ranking, start=1):
            if method == "rrf":
                part = 1.0 / (rrf_k + rank)
            else:
                part = (score - low) / (high - low) if high > low else 1.0
            fused[paper_id] = fused.get(paper_id, 0.0) + part
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]


HITS_SCHEMA = {
    "rank": pl.Int32, "paper_id": pl.String, "title": pl.String,
    "authors": pl.List(pl.String), "venue": pl.String, "year": pl.Int32,
    "topic_id": pl.Int32, "topic": pl.String, "link": pl.String, "code": pl.String,
    "score": pl.Float64, "bm25": pl.Float64, "all_words": pl.Boolean, "good_match": pl.Boolean,
    "no_good_match": pl.Boolean, "abstract": pl.String,
}  # fmt: skip


def ranked_hits(
    cards: pl.DataFrame,
    ranked: list[tuple[str, float]],
    cosine: dict[str, float] | None = None,
    bm25: dict[str, float] | None = None,
    all_words: set[str] | None = None,
    venue: str | None = None,
    year: int | None = None,
    min_cosine: float = MIN_COSINE,
    min_cosine_words: float = MIN_COSINE_WORDS,
) -> pl.DataFrame:
    """The hits of ranked ids from their cards (sql/search/cards.sql), as `hits` gives them.

    Args:
        cosine: each paper's cosine to the query (None: no query vector, no score).
    """
    if not ranked:
        return pl.DataFrame(schema=HITS_SCHEMA)
    ids = [pid for pid, _ in ranked]
    bm25 = bm25 or {}
    scores = pl.DataFrame(
        {
            "paper_id": ids,
            "cosine": [None if cosine is None else cosine.get(pid) for pid in ids],
            "bm25": [bm25.get(pid) for pid in ids],
            "all_words": [None if all_words is None else pid in all_words for pid in ids],
        },
        schema={"paper_id": pl.String, "cosine": pl.Float64, "bm25": pl.Float64,
                "all_words": pl.Boolean},
    )  # fmt: skip
    frame = scores.join(cards, on="paper_id", how="inner", maintain_order="left")
    if venue is not None:
        frame = frame.filter(pl.col("venue").str.to_lowercase() == venue.lower())
    if year is not None:
        frame = frame.filter(pl.col("year") == year)
    close, every = pl.col("cosine"), pl.col("all_words")
    good = (
        pl.when(close.is_null())
        .then(every)
        .otherwise((close >= min_cosine) | (every.fill_null(False) & (close >= min_cosine_words)))
    )
    return (
        frame.with_columns(
            rank=pl.int_range(1, frame.height + 1, dtype=pl.Int32),
            score=close.round(4, mode="half_away_from_zero"),  # as DuckDB's round
            bm25=pl.col("bm25").round(4, mode="half_away_from_zero"),
            good_match=good,
        )
        .with_columns(no_good_match=~pl.col("good_match").fill_null(False).any())
        .select(list(HITS_SCHEMA))
        .cast(HITS_SCHEMA)
    )


def hits(
    con: duckdb.DuckDBPyConnection,
    ranked: list[tuple[str, float]],
    venue: str | None = None,
    year: int | None = None,
    query: np.ndarray | None = None,
    bm25: dict[str, float] | None = None,
    all_words: set[str] | None = None,
    min_cosine: float = MIN_COSINE,
    min_cosine_words: float = MIN_COSINE_WORDS,
) -> pl.DataFrame:
    """The papers behind ranked ids, in rank order, with what a person acts on (see
    sql/search/cards.sql): rank, paper_id, title, authors, venue, year, topic_id, topic,
    link, code, score (cosine to `query`; None without one), bm25 (from `bm25`),
    all_words (in `all_words`; None when not asked), good_match, no_good_match (no hit of
    the list is a good match: the same on every row) and abstract.

    A hit is a good match when its score reaches `min_cosine`, or `min_cosine_words` and
    it holds every word of the query; without a score, when it holds every word.

    Args:
        venue, year: keep only hits of this venue and year (None for any).
    """
    if not ranked:
        return pl.DataFrame(schema=HITS_SCHEMA)
    ids = [pid for pid, _ in ranked]
    cards = con.execute(read_sql("search/cards"), {"ids": ids}).pl()
    cosine = None
    if query is not None:
        vectors = con.execute(read_sql("search/vectors"), {"ids": ids}).pl()
        matrix = as_matrix(vectors["embedding"])
        close = cosines(matrix, norms(matrix), query)
        cosine = dict(zip(vectors["paper_id"].to_list(), close.tolist(), strict=True))
    return ranked_hits(
        cards, ranked, cosine, bm25, all_words, venue, year, min_cosine, min_cosine_words
    )


class Corpus:
    """What a search reads of one version, in memory: the embeddings as one matrix (the
    dense part of a search is one matrix product), the fields filters read, and the
    version's keyword index attached once.

    Every query of a DuckLake table reads the catalog first (milliseconds each), so a
    search reads each table once, not once per step. A search command reads a corpus
    for its one search (`search`); a long-lived process (the explorer) keeps one per
    version, `held`: every paper's card is read up front and the keyword index gets a
    connection of its own, so the corpus answers searches after `con` is closed (the
    explorer reads a copy of the catalog, so that runs can publish).

    Close it (or use it as a context manager) to let the keyword index go.
    """

    def __init__(
        self, con: duckdb.DuckDBPyConnection, settings: Settings, held: bool = False
    ) -> None:
        self.settings = settings
        self.version = current_version(con)
        index = keyword_index(con, settings)
        self.con: duckdb.DuckDBPyConnection | None = con
        self.all_cards: pl.DataFrame | None = None
        self.resources = contextlib.ExitStack()
        try:
            # A cursor shares `con`'s database (its extensions: none to load), with its own
            # `use`; a held corpus's index needs a database that outlives `con`.
            self.keyword = connect(extensions=("fts",)) if held else con.cursor()
            self.resources.callback(self.keyword.close)
            self.resources.enter_context(keyword_scope(self.keyword, index))
            if held:
                self.all_cards = con.execute(read_sql("search/cards"), {"ids": None}).pl()
                self.facets = self.all_cards.select(
                    "paper_id", "venue", "year", "topic_id", "topic"
                )
                _ = self.model, self.vectors  # read now: `con` may be gone when they are used
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
    def vectors(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The embedded papers' ids, their vectors (a float32 row each) and their norms."""
        frame = self.lake().execute(read_sql("search/vectors"), {"ids": None}).pl()
        matrix = as_matrix(frame["embedding"])
        return frame["paper_id"].to_list(), matrix, norms(matrix)

    @functools.cached_property
    def facets(self) -> pl.DataFrame:
        return self.lake().execute(read_sql("search/facets")).pl()

    def cards(self, ids: list[str]) -> pl.DataFrame:
        if self.all_cards is None:
            return self.lake().execute(read_sql("search/cards"), {"ids": ids}).pl()
        return self.all_cards.filter(pl.col("paper_id").is_in(ids))

    def listing(self, ids: list[str]) -> pl.DataFrame:
        """The papers of `ids`, in that order, as `hits` gives them without a query."""
        return ranked_hits(self.cards(ids), [(pid, 0.0) for pid in ids])

    def encode(self, text: str) -> np.ndarray:
        """The query's unit vector by the model of the version's embeddings (no torch:
        see flows/embed/query.py)."""
        from flows.embed import encode_queries

        if self.model is None:
            raise ValueError("this version has no embeddings")
        return encode_queries([text], query_model(self.model, self.settings))[0]

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
        """As `search` (module level), on this corpus."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        pool = max(CANDIDATES, 5 * k)
        # The facets are read only when a filter asks for them.
        given = venue is not None or year is not None or topic is not None
        ids = filtered(self.facets, venue, year, topic) if given else None
        if ids == []:
            return pl.DataFrame(schema=HITS_SCHEMA)
        # One pass gives BM25 and which papers hold every word (asked in every mode). It
        # runs before the query is encoded: ONNX Runtime's threads spin a while after a
        # run, and DuckDB right after it took twice as long on 2 busy cores.
        scored, all_words = keyword_scores(self.keyword, text, ids)
        rankings = []
        cosine = None
        if mode in ("dense", "hybrid"):
            names, matrix, lengths = self.vectors  # read while the encoder may still load
            close = cosines(matrix, lengths, self.encode(text))
            cosine = dict(zip(names, close.tolist(), strict=True))
            if ids is None:
                rankings.append(best(close, names, pool))
            else:
                wanted = set(ids)
                rows = [row for row, pid in enumerate(names) if pid in wanted]
                rankings.append(best(close[rows], [names[row] for row in rows], pool))
        keyword: list[tuple[str, float]] = []
        if mode in ("keyword", "hybrid"):
            keyword = scored[:pool]
            rankings.append(keyword)
        ranked = (fuse(rankings, pool, fusion) if mode == "hybrid" else rankings[0])[:k]
        return ranked_hits(
            self.cards([pid for pid, _ in ranked]), ranked, cosine, dict(keyword), all_words,
            min_cosine=min_cosine, min_cosine_words=min_cosine_words,
        )  # fmt: skip


def search(
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


def no_good_match(
    frame: pl.DataFrame,
    min_cosine: float = MIN_COSINE,
    min_cosine_words: float = MIN_COSINE_WORDS,
) -> str | None:
    """A line saying that even the best hit is weak, or None when one is a good match (or
    there are no hits: the filters left none)."""
    if frame.height == 0 or frame["good_match"].any():
        return None
    scores = frame["score"].drop_nulls()
    if scores.len() == 0:  # keyword mode: no cosine
        return "no good match: no paper holds every word of the query"
    return (
        f"no good match: the closest paper's cosine is {scores.max():.2f} (a good match "
        f"reaches {min_cosine:.2f}, or {min_cosine_words:.2f} holding every word of the query)"
    )


def dense_search(
    con: duckdb.DuckDBPyConnection, text: str, k: int, settings: Settings
) -> pl.DataFrame:
    """The k papers closest in meaning to `text`."""
    return search(con, text, settings, k=k, mode="dense")


def similar(con: duckdb.DuckDBPyConnection, paper_id: str, k: int = 10) -> pl.DataFrame:
    """The k papers closest to a published paper, by its own embedding (columns as `hits`)."""
    row = con.execute("select embedding from embeddings where paper_id = ?", [paper_id]).fetchone()
    if row is None:
        raise ValueError(f"no paper {paper_id} in this version")
    vector = np.asarray(row[0], dtype=np.float32)
    ranked = dense_ranking(con, vector, k, exclude=paper_id)
    return hits(con, ranked, query=vector)
