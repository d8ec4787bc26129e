"""A search's hits: the ranked papers with what a person reads to judge them, and whether
any of them is a good match."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl

from flows.core.lake import read_sql
from flows.read.ranking import as_matrix, cosines, norms

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


HITS_SCHEMA = {
    "rank": pl.Int32, "paper_id": pl.String, "title": pl.String,
    "authors": pl.List(pl.String), "venue": pl.String, "year": pl.Int32,
    "topic_id": pl.Int32, "topic": pl.String, "link": pl.String, "code": pl.String,
    "decision": pl.String, "score": pl.Float64, "bm25": pl.Float64, "all_words": pl.Boolean,
    "good_match": pl.Boolean, "no_good_match": pl.Boolean, "abstract": pl.String,
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
    link, code, decision (a bare code labelled "decision 2"), score (cosine to `query`;
    None without one), bm25 (from `bm25`), all_words (in `all_words`; None when not
    asked), good_match, no_good_match (no hit of the list is a good match: the same on
    every row) and abstract.

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
