"""Aggregate: neighbours, near-duplicates, topics and stats, built in DuckDB from sql/."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from flows.embed import compute_threads
from flows.lake import read_sql
from flows.settings import NEIGHBOR_METHODS, SQL_DIR
from flows.tables import sql_tables

BLOCK_ROWS = 2048
TOPIC_TERMS = 8
SILHOUETTE_SAMPLE = 2000
TOPIC_MATCH_MIN = 0.9  # centroid cosine at which a topic counts as the same topic
# Tables built by sql/<name>.sql, in dependency order (flows/tables.py).
SQL_TABLES = tuple(sql_tables())


def vectors_of(embeddings: pl.DataFrame, ids: pl.Series) -> np.ndarray:
    """The embedding matrix (float32, rows in the order of `ids`)."""
    ordered = pl.DataFrame({"paper_id": ids}).join(
        embeddings.select("paper_id", "embedding"), on="paper_id", how="left", maintain_order="left"
    )
    if ordered["embedding"].null_count():
        raise ValueError("some papers have no embedding")
    if ordered.height == 0:
        return np.zeros((0, 0), dtype=np.float32)
    dim = len(ordered["embedding"][0])
    return ordered["embedding"].cast(pl.Array(pl.Float32, dim)).to_numpy().astype(np.float32)


HNSW_LINKS = 32  # graph degree: recall 0.998 at 10,000 bench abstracts (make bench-scaling)
HNSW_BUILD_BREADTH = 40
HNSW_SEARCH_BREADTH = 64
PAIR_CANDIDATES = 32  # neighbours fetched per paper when pairs come from the graph


def neighbor_method(method: str, n: int, exact_max: int) -> str:
    """exact or hnsw: `auto` takes exact up to `exact_max` papers, where it is also faster."""
    if method not in NEIGHBOR_METHODS:
        raise ValueError(f"neighbour method must be one of {', '.join(NEIGHBOR_METHODS)}")
    if method == "auto":
        return "exact" if n <= exact_max else "hnsw"
    return method


def nearest(
    ids: list[str],
    vectors: np.ndarray,
    k: int,
    threshold: float,
    method: str = "auto",
    exact_max: int = 20_000,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Top-k neighbours of every paper and every pair at cosine >= `threshold`.

    Exact (blockwise matrix products) up to `exact_max` papers, an HNSW graph above it:
    exact work grows with n^2 and the graph's with about n log n.

    Returns:
        neighbor_candidates (paper_id, neighbor_id, score) and similar_pairs (same columns).
    """
    chosen = neighbor_method(method, len(ids), exact_max)
    search = exact_nearest if chosen == "exact" else graph_nearest
    top, pairs = search(vectors, k, threshold)
    return id_frame(ids, *top), id_frame(ids, *pairs)


Triples = tuple[np.ndarray, np.ndarray, np.ndarray]  # row, column, score


def exact_nearest(vectors: np.ndarray, k: int, threshold: float) -> tuple[Triples, Triples]:
    """Exact top-k and pairs above `threshold`, by blockwise matrix products.

    Each block of rows is multiplied with the whole matrix and reduced with top-k at once,
    so memory stays at BLOCK_ROWS x n and no n^2 table is ever built; at 10,000 papers this
    takes about a second where an all-pairs SQL self-join takes minutes.
    """
    return exact_rows(vectors, 0, len(vectors), k, threshold)


def exact_rows(
    vectors: np.ndarray, first: int, stop: int, k: int, threshold: float
) -> tuple[Triples, Triples]:
    """`exact_nearest` for the papers in rows [first, stop) only, against every paper.

    Blocks start at multiples of BLOCK_ROWS, so rows split across workers on block
    boundaries give the same scores, bit for bit, as one process.
    """
    import torch

    torch.set_num_threads(compute_threads())
    n = len(vectors)
    take = min(k, n - 1)  # self is excluded, so at most n - 1 neighbours
    matrix = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32))
    top_parts, pair_parts = [], []
    with torch.inference_mode():
        for start in range(first, stop, BLOCK_ROWS):
            block = matrix[start : min(start + BLOCK_ROWS, stop)] @ matrix.T
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
    return concat_triples(top_parts), concat_triples(pair_parts)


def row_blocks(n: int, pieces: int) -> list[tuple[int, int]]:
    """Rows [0, n) cut into about `pieces` ranges on BLOCK_ROWS boundaries."""
    blocks = -(-n // BLOCK_ROWS)
    per = max(1, -(-blocks // max(1, pieces))) * BLOCK_ROWS
    return [(start, min(start + per, n)) for start in range(0, n, per)]


def nearest_in_pieces(
    ids: list[str],
    vectors: np.ndarray,
    k: int,
    threshold: float,
    method: str,
    exact_max: int,
    workdir: Path,
    fan: Callable[[list[tuple[int, int]], Path, Path | None], list[tuple[Triples, Triples]]],
    pieces: int,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`nearest`, its search split into ranges of query rows that `fan` searches elsewhere.

    The matrix (and for hnsw the graph, built here) is written once to `workdir` for the
    workers to read; `fan` maps the row ranges, the matrix file and the graph file (None
    for exact search) to each range's triples, through `search_rows`.
    """
    if not len(ids):
        return nearest(ids, vectors, k, threshold, method, exact_max)
    workdir.mkdir(parents=True, exist_ok=True)
    matrix = workdir / f"vectors-{os.getpid()}.npy"
    graph = None
    np.save(matrix, np.ascontiguousarray(vectors, dtype=np.float32))
    try:
        if neighbor_method(method, len(ids), exact_max) == "hnsw":
            import faiss

            graph = workdir / f"graph-{os.getpid()}.faiss"
            faiss.write_index(build_graph(vectors), str(graph))
        parts = fan(row_blocks(len(ids), pieces), matrix, graph)
    finally:
        matrix.unlink(missing_ok=True)
        if graph:
            graph.unlink(missing_ok=True)
    top, pairs = concat_triples([p[0] for p in parts]), concat_triples([p[1] for p in parts])
    return id_frame(ids, *top), id_frame(ids, *pairs)


def search_rows(
    rows: tuple[int, int], matrix: Path, graph: Path | None, k: int, threshold: float
) -> tuple[Triples, Triples]:
    """One range of query rows of `nearest_in_pieces`, from its files (on a worker)."""
    vectors = np.load(matrix)
    if graph is None:
        return exact_rows(vectors, *rows, k, threshold)
    import faiss

    return graph_rows(faiss.read_index(str(graph)), vectors, *rows, k, threshold)


def graph_nearest(vectors: np.ndarray, k: int, threshold: float) -> tuple[Triples, Triples]:
    """Approximate top-k and pairs above `threshold` from a FAISS HNSW graph.

    The graph is built on one thread, so that the same vectors give the same graph and the
    same neighbours; the search runs on every core.
    """
    if len(vectors) == 0:
        return concat_triples([]), concat_triples([])
    return graph_rows(build_graph(vectors), vectors, 0, len(vectors), k, threshold)


def build_graph(vectors: np.ndarray):
    """A FAISS HNSW graph of `vectors` (inner product), built on one thread."""
    import faiss

    index = faiss.IndexHNSWFlat(vectors.shape[1], HNSW_LINKS, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = HNSW_BUILD_BREADTH
    faiss.omp_set_num_threads(1)
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def graph_rows(
    index, vectors: np.ndarray, first: int, stop: int, k: int, threshold: float
) -> tuple[Triples, Triples]:
    """Graph search for the papers in rows [first, stop): top-k and pairs above `threshold`.

    A paper whose PAIR_CANDIDATES graph neighbours all lie above `threshold` may have more
    such pairs: its row is checked exactly against every paper.
    """
    import faiss

    faiss.omp_set_num_threads(compute_threads())
    n = len(vectors)
    data = np.ascontiguousarray(vectors, dtype=np.float32)
    fetch = min(n, max(k, PAIR_CANDIDATES) + 1)  # + 1: a paper finds itself
    index.hnsw.efSearch = max(HNSW_SEARCH_BREADTH, fetch)
    scores, cols = index.search(data[first:stop], fetch)
    rows = np.repeat(np.arange(first, stop), fetch).reshape(stop - first, fetch)
    keep = (cols >= 0) & (cols != rows)
    # Rank within each row after dropping self and empty slots, then cut at k.
    rank = np.cumsum(keep, axis=1) - 1
    in_top = keep & (rank < k)
    top = (rows[in_top], cols[in_top], scores[in_top])
    above = keep & (scores >= threshold)
    pairs = (rows[above], cols[above], scores[above])
    crowded = first + np.flatnonzero(above.sum(axis=1) >= fetch - 1)
    if len(crowded):
        plain = ~np.isin(pairs[0], crowded)
        parts = [(pairs[0][plain], pairs[1][plain], pairs[2][plain])]
        for start in range(0, len(crowded), BLOCK_ROWS):
            rows_here = crowded[start : start + BLOCK_ROWS]
            block = data[rows_here] @ data.T
            block[np.arange(len(rows_here)), rows_here] = -np.inf
            hit_row, hit_col = np.nonzero(block >= threshold)
            parts.append((rows_here[hit_row], hit_col, block[hit_row, hit_col]))
        pairs = concat_triples(parts)
    return top, pairs


def concat_triples(parts: list[Triples]) -> Triples:
    if not parts:
        return np.array([], np.int64), np.array([], np.int64), np.array([], np.float32)
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def id_frame(ids: list[str], rows: np.ndarray, cols: np.ndarray, scores: np.ndarray):
    """(paper_id, neighbor_id, score) from row and column positions in `ids`."""
    ids_arr = np.asarray(ids, dtype=object)
    return pl.DataFrame(
        {
            "paper_id": pl.Series(ids_arr[rows].tolist(), dtype=pl.String),
            "neighbor_id": pl.Series(ids_arr[cols].tolist(), dtype=pl.String),
            "score": pl.Series(np.asarray(scores).astype(np.float64)),
        }
    )


def choose_topic_count(vectors: np.ndarray, requested: int | None, seed: int) -> int:
    """The number of topics: as requested, else the best silhouette near sqrt(n / 2).

    Candidates run from 0.75x to 2x the rule of thumb; each is clustered on a sample of
    at most SILHOUETTE_SAMPLE papers and scored by cosine silhouette.
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    n = len(vectors)
    if n == 0:
        return 0
    if requested:
        return max(1, min(requested, n))
    guess = max(1, round(math.sqrt(n / 2)))
    candidates = sorted({round(guess * f) for f in (0.75, 1, 1.5, 2)} & set(range(2, n)))
    if n < 8 or len(candidates) < 2:
        return min(guess, n)
    rng = np.random.default_rng(seed)
    sample = vectors[np.sort(rng.choice(n, size=min(n, SILHOUETTE_SAMPLE), replace=False))]
    scores = {}
    for k in candidates:
        labels = KMeans(n_clusters=k, random_state=seed, n_init=2).fit_predict(sample)
        scores[k] = silhouette_score(sample, labels, metric="cosine")
    return max(candidates, key=lambda k: (round(scores[k], 4), -k))


def match_topics(centroids: np.ndarray, previous: dict[int, np.ndarray]) -> dict[int, int]:
    """Cluster index -> the previous version's topic id, for clusters that persist.

    A cluster persists when the one-to-one assignment that maximises total centroid
    similarity pairs it with an old topic at cosine >= TOPIC_MATCH_MIN.
    """
    from scipy.optimize import linear_sum_assignment

    if not previous or len(centroids) == 0:
        return {}
    old_ids = sorted(previous)
    old = np.stack([previous[i] for i in old_ids])
    old = old / np.linalg.norm(old, axis=1, keepdims=True)
    sims = centroids @ old.T
    rows, cols = linear_sum_assignment(-sims)
    return {
        int(r): old_ids[c] for r, c in zip(rows, cols, strict=True) if sims[r, c] >= TOPIC_MATCH_MIN
    }


def cluster_topics(
    ids: list[str],
    vectors: np.ndarray,
    n_topics: int | None,
    seed: int,
    previous: dict[int, np.ndarray] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Seeded k-means over unit vectors.

    Topic ids persist across versions: a cluster whose centroid matches a topic of the
    previous version keeps that topic's id; other clusters take new ids, larger first.

    Returns:
        paper_topics (paper_id, topic_id, cosine distance to the centroid) and
        topic_centroids (topic_id, centroid).
    """
    from sklearn.cluster import KMeans

    schema = {"paper_id": pl.String, "topic_id": pl.Int32, "distance": pl.Float64}
    centroid_schema = {"topic_id": pl.Int32, "centroid": pl.List(pl.Float32)}
    if len(ids) == 0:
        return pl.DataFrame(schema=schema), pl.DataFrame(schema=centroid_schema)
    data = vectors.astype(np.float64)
    guess = max(1, round(math.sqrt(len(ids) / 2)))
    if (
        previous
        and n_topics is None
        and len(ids) > len(previous)
        and guess / 2 <= len(previous) <= 2 * guess
    ):
        # The corpus grew or changed a little: start from last version's topics, so that
        # topics persist instead of being re-drawn from scratch.
        init = np.stack([previous[t] for t in sorted(previous)]).astype(np.float64)
        model = KMeans(n_clusters=len(init), init=init, n_init=1, random_state=seed).fit(data)
    else:
        k = choose_topic_count(vectors, n_topics, seed)
        model = KMeans(n_clusters=k, random_state=seed, n_init=4).fit(data)
    k = model.n_clusters
    centroids = model.cluster_centers_ / np.linalg.norm(
        model.cluster_centers_, axis=1, keepdims=True
    )
    labels = model.labels_
    distance = 1.0 - np.einsum("ij,ij->i", vectors, centroids[labels])
    raw = pl.DataFrame(
        {"paper_id": ids, "cluster": labels.astype(np.int32), "distance": distance.round(6)}
    )
    kept = match_topics(centroids, previous or {})
    next_id = max(previous, default=-1) + 1 if previous else 0
    by_size = (
        raw.group_by("cluster")
        .agg(size=pl.len(), first=pl.col("paper_id").min())
        .sort(["size", "first"], descending=[True, False])["cluster"]
        .to_list()
    )
    topic_of: dict[int, int] = {}
    for cluster in by_size:
        if cluster in kept:
            topic_of[cluster] = kept[cluster]
        else:
            topic_of[cluster], next_id = next_id, next_id + 1
    mapping = pl.DataFrame(
        {"cluster": list(topic_of), "topic_id": list(topic_of.values())},
        schema={"cluster": pl.Int32, "topic_id": pl.Int32},
    )
    assignments = raw.join(mapping, on="cluster").select(list(schema)).sort("paper_id")
    topic_centroids = pl.DataFrame(
        {
            "topic_id": [topic_of[c] for c in range(k)],
            "centroid": pl.Series(centroids.astype(np.float32).tolist(), dtype=pl.List(pl.Float32)),
        },
        schema=centroid_schema,
    ).sort("topic_id")
    return assignments, topic_centroids


def stopwords() -> pl.DataFrame:
    """Words left out of topic terms: scikit-learn's English list plus the academic filler
    in sql/seeds/academic_stopwords.csv (one word a line; extend it freely)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    academic = pl.read_csv(SQL_DIR / "seeds" / "academic_stopwords.csv")["word"].to_list()
    return pl.DataFrame({"word": sorted(ENGLISH_STOP_WORDS | set(academic))})


def mention_vocabulary() -> pl.DataFrame:
    """Benchmarks, datasets and metrics to look for: sql/seeds/mentions.csv (name, kind,
    RE2 pattern); extend the file to track more."""
    return pl.read_csv(SQL_DIR / "seeds" / "mentions.csv", infer_schema=False)


def stage_vocabulary(con: duckdb.DuckDBPyConnection) -> None:
    """Put the mention vocabulary in `con`, with all its patterns as one alternation."""
    vocabulary = mention_vocabulary()
    con.register("vocabulary_frame", vocabulary)
    con.execute("create or replace table mention_vocabulary as select * from vocabulary_frame")
    con.unregister("vocabulary_frame")
    alternation = "|".join(f"(?:{pattern})" for pattern in vocabulary["pattern"])
    con.execute("set variable mention_pattern = ?", [alternation])


def build_aggregates(
    con: duckdb.DuckDBPyConnection,
    papers: pl.DataFrame,
    embeddings: pl.DataFrame,
    k: int,
    threshold: float,
    n_topics: int | None,
    seed: int,
    previous_topics: dict[int, np.ndarray] | None = None,
    neighbors_method: str = "auto",
    exact_neighbors_max: int = 20_000,
    search: Callable[[list[str], np.ndarray], tuple[pl.DataFrame, pl.DataFrame]] | None = None,
) -> dict[str, int]:
    """Build the derived tables in `con` (which already holds papers, sources, paper_sources).

    Args:
        previous_topics: topic id -> centroid of the previous version, to keep ids stable.
        neighbors_method: auto, exact or hnsw (see `nearest`).
        search: finds neighbour candidates and pairs of (ids, vectors) elsewhere (a
            cluster's workers); without it, `nearest` runs here.

    Returns:
        row count per table built.
    """
    ids = papers["paper_id"].sort().to_list()
    vectors = vectors_of(embeddings, pl.Series(ids, dtype=pl.String))
    if search is None:
        candidates, pairs = nearest(
            ids, vectors, k, threshold, neighbors_method, exact_neighbors_max
        )
    else:
        candidates, pairs = search(ids, vectors)
    assignments, centroids = cluster_topics(ids, vectors, n_topics, seed, previous_topics)
    for name, frame in (
        ("neighbor_candidates", candidates),
        ("similar_pairs", pairs),
        ("paper_topics", assignments),
        ("topic_centroids", centroids),
        ("stopwords", stopwords()),
    ):
        con.register(f"{name}_frame", frame)
        con.execute(f"create or replace table {name} as select * from {name}_frame")
        con.unregister(f"{name}_frame")
    con.execute(f"set variable neighbors_k = {int(k)}")
    con.execute(f"set variable duplicate_threshold = {float(threshold)}")
    con.execute(f"set variable topic_terms = {TOPIC_TERMS}")
    stage_vocabulary(con)
    counts = {"paper_topics": assignments.height}
    for table in SQL_TABLES:
        con.execute(f"create or replace table {table} as {read_sql(table)}")
        counts[table] = con.execute(f"select count(*) from {table}").fetchone()[0]
    for scratch in (
        "neighbor_candidates", "similar_pairs", "topic_centroids", "stopwords", "mention_vocabulary"
    ):  # fmt: skip
        con.execute(f"drop table {scratch}")
    return counts
