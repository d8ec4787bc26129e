"""Aggregate: neighbours, near-duplicates, topics and stats, built in DuckDB from sql/."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import polars as pl

from flows.lake import read_sql
from flows.settings import SQL_DIR

BLOCK_ROWS = 2048
TOPIC_TERMS = 8
# Tables built by sql/<name>.sql, in dependency order.
SQL_TABLES = ("neighbors", "duplicates", "topic_terms", "topics", "venue_stats", "source_stats")


def vectors_of(embeddings: pl.DataFrame, ids: pl.Series) -> np.ndarray:
    """The embedding matrix (float32, rows in the order of `ids`)."""
    ordered = pl.DataFrame({"paper_id": ids}).join(
        embeddings.select("paper_id", "embedding"), on="paper_id", how="left", maintain_order="left"
    )
    if ordered["embedding"].null_count():
        raise ValueError("some papers have no embedding")
    dim = len(ordered["embedding"][0]) if ordered.height else 0
    return ordered["embedding"].cast(pl.Array(pl.Float32, dim)).to_numpy().astype(np.float32)


def nearest(
    ids: list[str], vectors: np.ndarray, k: int, threshold: float
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Exact top-k neighbours and every pair above `threshold`, by blockwise matrix products.

    Each block of rows is multiplied with the whole matrix and reduced with top-k at once,
    so memory stays at BLOCK_ROWS x n and no n^2 table is ever built; at 10,000 papers this
    takes about a second where an all-pairs SQL self-join takes minutes.

    Returns:
        neighbor_candidates (paper_id, neighbor_id, score) and similar_pairs (same columns).
    """
    import torch

    n = len(ids)
    ids_arr = np.asarray(ids, dtype=object)
    take = min(k, n - 1)  # self is excluded, so at most n - 1 neighbours
    matrix = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32))
    top_parts, pair_parts = [], []
    with torch.inference_mode():
        for start in range(0, n, BLOCK_ROWS):
            block = matrix[start : start + BLOCK_ROWS] @ matrix.T
            rows = torch.arange(block.shape[0])
            block[rows, start + rows] = -torch.inf  # a paper is not its own neighbour
            if take > 0:
                scores, cols = torch.topk(block, take, dim=1)
                src = (start + rows).repeat_interleave(take)
                top_parts.append(
                    (src.numpy(), cols.reshape(-1).numpy(), scores.reshape(-1).numpy())
                )
            hits = torch.nonzero(block >= threshold)
            pair_parts.append(
                (
                    (start + hits[:, 0]).numpy(),
                    hits[:, 1].numpy(),
                    block[hits[:, 0], hits[:, 1]].numpy(),
                )
            )

    def frame(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> pl.DataFrame:
        src = np.concatenate([p[0] for p in parts]) if parts else np.array([], dtype=np.int64)
        dst = np.concatenate([p[1] for p in parts]) if parts else np.array([], dtype=np.int64)
        val = np.concatenate([p[2] for p in parts]) if parts else np.array([], dtype=np.float32)
        return pl.DataFrame(
            {
                "paper_id": pl.Series(ids_arr[src].tolist(), dtype=pl.String),
                "neighbor_id": pl.Series(ids_arr[dst].tolist(), dtype=pl.String),
                "score": pl.Series(val.astype(np.float64)),
            }
        )

    return frame(top_parts), frame(pair_parts)


def choose_topic_count(n: int, requested: int | None) -> int:
    """The number of topics: as requested, else about sqrt(n / 2), within [1, n]."""
    if n == 0:
        return 0
    if requested:
        return max(1, min(requested, n))
    return max(1, min(n, round(math.sqrt(n / 2))))


def cluster_topics(
    ids: list[str], vectors: np.ndarray, n_topics: int | None, seed: int
) -> pl.DataFrame:
    """Seeded k-means over unit vectors: paper_id, topic_id, cosine distance to its centroid.

    Topic ids are numbered by size (0 is the largest), ties by smallest member id.
    """
    from sklearn.cluster import KMeans

    k = choose_topic_count(len(ids), n_topics)
    schema = {"paper_id": pl.String, "topic_id": pl.Int32, "distance": pl.Float64}
    if k == 0:
        return pl.DataFrame(schema=schema)
    model = KMeans(n_clusters=k, random_state=seed, n_init=4).fit(vectors.astype(np.float64))
    centroids = model.cluster_centers_ / np.linalg.norm(
        model.cluster_centers_, axis=1, keepdims=True
    )
    labels = model.labels_
    distance = 1.0 - np.einsum("ij,ij->i", vectors, centroids[labels])
    raw = pl.DataFrame(
        {"paper_id": ids, "cluster": labels.astype(np.int32), "distance": distance.round(6)}
    )
    renumber = (
        raw.group_by("cluster")
        .agg(size=pl.len(), first=pl.col("paper_id").min())
        .sort(["size", "first"], descending=[True, False])
        .with_row_index("topic_id")
        .select(pl.col("topic_id").cast(pl.Int32), "cluster")
    )
    return raw.join(renumber, on="cluster").select(list(schema)).sort("paper_id")


def stopwords() -> pl.DataFrame:
    """Words left out of topic terms: scikit-learn's English list plus the academic filler
    in sql/seeds/academic_stopwords.csv (one word a line; extend it freely)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    academic = pl.read_csv(SQL_DIR / "seeds" / "academic_stopwords.csv")["word"].to_list()
    return pl.DataFrame({"word": sorted(ENGLISH_STOP_WORDS | set(academic))})


def build_aggregates(
    con: duckdb.DuckDBPyConnection,
    papers: pl.DataFrame,
    embeddings: pl.DataFrame,
    k: int,
    threshold: float,
    n_topics: int | None,
    seed: int,
) -> dict[str, int]:
    """Build the derived tables in `con` (which already holds papers, sources, paper_sources).

    Returns:
        row count per table built.
    """
    ids = papers["paper_id"].sort().to_list()
    vectors = vectors_of(embeddings, pl.Series(ids))
    candidates, pairs = nearest(ids, vectors, k, threshold)
    assignments = cluster_topics(ids, vectors, n_topics, seed)
    for name, frame in (
        ("neighbor_candidates", candidates),
        ("similar_pairs", pairs),
        ("paper_topics", assignments),
        ("stopwords", stopwords()),
    ):
        con.register(f"{name}_frame", frame)
        con.execute(f"create or replace table {name} as select * from {name}_frame")
        con.unregister(f"{name}_frame")
    con.execute(f"set variable neighbors_k = {int(k)}")
    con.execute(f"set variable duplicate_threshold = {float(threshold)}")
    con.execute(f"set variable topic_terms = {TOPIC_TERMS}")
    counts = {"paper_topics": assignments.height}
    for table in SQL_TABLES:
        con.execute(f"create or replace table {table} as {read_sql(table)}")
        counts[table] = con.execute(f"select count(*) from {table}").fetchone()[0]
    con.execute("drop table neighbor_candidates; drop table similar_pairs; drop table stopwords")
    return counts
