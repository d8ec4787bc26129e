"""The retrievers of a search and their fusion: dense (cosine to the query's vector),
keyword (BM25 over the version's keyword index) and both fused into one ranking."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from flows.core.lake import read_sql
from flows.read.search_index import keyword_scope

FUSIONS = ("score", "rrf")
RRF_K = 60  # the constant of reciprocal rank fusion (Cormack et al., 2009)


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
        return [keyword_scores(con, text, k, ids) for text in texts]


def keyword_scores(
    con: duckdb.DuckDBPyConnection, text: str, k: int, ids: list[str] | None = None
) -> list[tuple[str, float]]:
    """The k papers (of `ids`; None for all) of best BM25 for `text`, best first; `con` has
    the keyword index in use."""
    params = {"text": text, "k": k, "ids": ids}
    return con.execute(read_sql("search/keyword"), params).fetchall()


def holding_every_word(con: duckdb.DuckDBPyConnection, text: str, ids: list[str]) -> set[str]:
    """Those of `ids` that hold every term of `text` (its stop words left out); `con` has
    the keyword index in use."""
    if not ids:
        return set()
    [(terms,)] = con.execute(read_sql("search/terms"), {"text": text}).fetchall()
    rows = con.execute(read_sql("search/all_words"), {"terms": terms, "ids": ids}).fetchall()
    return {paper_id for (paper_id,) in rows}


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
        keep &= pl.col("venue").cast(pl.String).str.to_lowercase() == venue.lower()
    if year is not None:
        keep &= pl.col("year") == year
    if topic is not None:
        keep &= of_topic(topic)
    return facets.filter(keep)["paper_id"].to_list()


def of_topic(topic: int | str, label: str = "topic") -> pl.Expr:
    """Rows of a topic given as its id or as words found in its label (case ignored), of a
    frame with topic_id and the label in column `label`."""
    words = str(topic).strip(" ")
    return (pl.col("topic_id").cast(pl.String) == words) | pl.col(label).cast(
        pl.String
    ).str.to_lowercase().str.contains(words.lower(), literal=True)


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
