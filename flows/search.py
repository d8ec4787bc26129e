"""Search a published version: dense (embeddings), keyword (BM25) and hybrid (both fused).

Hits are ranked by the fusion, and each carries what a person reads to judge it: `score`,
the cosine of the query's vector and the paper's (the same scale for every query, so a
weak best hit says the corpus has nothing close), and `bm25`, the keyword score. Queries
are encoded without torch (flows/query_encoder.py).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from flows.lake import LAKE, connect, read_sql
from flows.settings import PACKAGED_MODEL, Settings

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


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    """The snapshot the connection reads (latest, or the one it was attached at)."""
    return con.execute(f"select * from {LAKE}.current_snapshot()").fetchone()[0]


def index_path(settings: Settings, version: int) -> Path:
    return settings.cache_path / "search" / f"v{version}.duckdb"


def build_keyword_index(con: duckdb.DuckDBPyConnection, path: Path) -> Path:
    """Write the full-text (BM25) index of the attached version's papers to `path`.

    DuckLake tables take no indexes, so the index lives beside the catalog, one file per
    version; it is written under a temporary name and moved into place whole.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    docs = con.execute(read_sql("search/docs")).arrow()
    index = connect(str(tmp))
    try:
        index.register("docs_frame", docs)
        index.execute("create table docs as select * from docs_frame")
        index.execute(
            "pragma create_fts_index('docs', 'paper_id', 'text', stemmer = 'porter', "
            "stopwords = 'english', overwrite = 1)"
        )
    finally:
        index.close()
    os.replace(tmp, path)
    return path


def keyword_index(con: duckdb.DuckDBPyConnection, settings: Settings) -> Path:
    """The keyword index file of the attached version, built on first use."""
    path = index_path(settings, current_version(con))
    if not path.exists():
        build_keyword_index(con, path)
    return path


@contextlib.contextmanager
def keyword_scope(con: duckdb.DuckDBPyConnection, index: Path) -> Iterator[None]:
    """The keyword index file attached and in use, for the SQL run inside."""
    current = con.execute("select current_database()").fetchone()[0]
    con.execute(f"attach '{index}' as keyword_index (read_only)")
    try:
        con.execute("use keyword_index")
        yield
    finally:
        con.execute(f"use {current}")
        con.execute("detach keyword_index")


def keyword_ranking(
    con: duckdb.DuckDBPyConnection,
    index: Path,
    texts: list[str],
    k: int,
    ids: list[str] | None = None,
) -> list[list[tuple[str, float]]]:
    """For each text, the k best papers by BM25 over the indexed title and abstract.

    Args:
        ids: only these papers (from `filtered_ids`); None for all.
    """
    sql = read_sql("search/keyword")
    with keyword_scope(con, index):
        return [con.execute(sql, {"text": text, "k": k, "ids": ids}).fetchall() for text in texts]


def with_all_terms(
    con: duckdb.DuckDBPyConnection, index: Path, text: str, ids: list[str]
) -> set[str]:
    """Those of `ids` whose title or abstract holds every term of `text`."""
    if not ids:
        return set()
    with keyword_scope(con, index):
        rows = con.execute(read_sql("search/all_terms"), {"text": text, "ids": ids}).fetchall()
    return {row[0] for row in rows}


def filtered_ids(
    con: duckdb.DuckDBPyConnection,
    venue: str | None = None,
    year: int | None = None,
    topic: int | str | None = None,
) -> list[str] | None:
    """The papers that pass the filters given, or None when none is given (every paper)."""
    if venue is None and year is None and topic is None:
        return None
    params = {"venue": venue, "year": year, "topic": None if topic is None else str(topic)}
    return [row[0] for row in con.execute(read_sql("search/filtered"), params).fetchall()]


def dense_ranking(
    con: duckdb.DuckDBPyConnection,
    vector: np.ndarray,
    k: int,
    venue: str | None = None,
    year: int | None = None,
    exclude: str | None = None,
    topic: int | str | None = None,
    ids: list[str] | None = None,
) -> list[tuple[str, float]]:
    """The k papers whose embeddings are closest to `vector` (exact cosine).

    Args:
        ids: the papers to rank (from `filtered_ids`); by default those passing the filters.
    """
    if ids is None:
        ids = filtered_ids(con, venue, year, topic)
    params = {"query": vector.tolist(), "k": k, "ids": ids, "exclude": exclude}
    return con.execute(read_sql("search/dense"), params).fetchall()


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
    sql/search/hits.sql): rank, paper_id, title, authors, venue, year, topic_id, topic,
    link, code, score (cosine to `query`; None without one), bm25 (from `bm25`),
    all_words (in `all_words`; None when not asked), good_match, no_good_match (no hit of
    the list is a good match: the same on every row) and abstract.

    A hit is a good match when its score reaches `min_cosine`, or `min_cosine_words` and
    it holds every word of the query; without a score, when it holds every word.

    Args:
        venue, year: keep only hits of this venue and year (None for any).
    """
    bm25 = bm25 or {}
    payload = [
        {
            "paper_id": pid,
            "bm25": bm25.get(pid),
            "all_words": None if all_words is None else pid in all_words,
        }
        for pid, _ in ranked
    ]
    if not payload:
        return pl.DataFrame(schema=HITS_SCHEMA)
    params = {
        "ranked": payload,
        "query": None if query is None else query.tolist(),
        "min_cosine": min_cosine,
        "min_cosine_words": min_cosine_words,
    }
    frame = con.execute(read_sql("search/hits"), params).pl()
    if venue is not None:
        frame = frame.filter(pl.col("venue").str.to_lowercase() == venue.lower())
    if year is not None:
        frame = frame.filter(pl.col("year") == year)
    return (
        frame.with_columns(
            rank=pl.int_range(1, frame.height + 1, dtype=pl.Int32),
            no_good_match=~pl.col("good_match").fill_null(False).any(),
        )
        .select(list(HITS_SCHEMA))
        .cast(HITS_SCHEMA)
    )


def encode_query(con: duckdb.DuckDBPyConnection, text: str, settings: Settings) -> np.ndarray:
    """The query's unit vector by the model of the version's embeddings (no torch: see
    flows/query_encoder.py)."""
    from flows.query_encoder import encode_queries

    model = query_model(version_model(con), settings)
    return encode_queries([text], model)[0]


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
        topic: only papers of this topic: its id, or words of its label.
        min_cosine, min_cosine_words: the least `score` of a good match, and of one that
            holds every word of the query (see `hits`).

    Returns:
        the hits as `hits` gives them; in keyword mode without score.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    pool = max(CANDIDATES, 5 * k)
    ids = filtered_ids(con, venue, year, topic)
    if ids == []:
        return pl.DataFrame(schema=HITS_SCHEMA)
    rankings = []
    vector = None
    if mode in ("dense", "hybrid"):
        vector = encode_query(con, text, settings)
        rankings.append(dense_ranking(con, vector, pool, ids=ids))
    index = keyword_index(con, settings)
    keyword: list[tuple[str, float]] = []
    if mode in ("keyword", "hybrid"):
        keyword = keyword_ranking(con, index, [text], pool, ids)[0]
        rankings.append(keyword)
    ranked = (fuse(rankings, pool, fusion) if mode == "hybrid" else rankings[0])[:k]
    return hits(
        con, ranked, query=vector, bm25=dict(keyword),
        all_words=with_all_terms(con, index, text, [pid for pid, _ in ranked]),
        min_cosine=min_cosine, min_cosine_words=min_cosine_words,
    )  # fmt: skip


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
