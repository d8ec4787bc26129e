"""Aggregate: neighbours, near-duplicates, topics and stats, built in DuckDB from sql/."""

from __future__ import annotations

import contextvars
import hashlib
import importlib.util
import math
import os
import re
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from flows.core import cache, tables
from flows.core.lake import read_sql
from flows.core.settings import NEIGHBOR_METHODS, SQL_DIR
from flows.core.tables import sql_tables
from flows.derive import map as projection
from flows.embed import compute_threads
from flows.publish import stage_frames

# Rows whose products with every paper are made at a time. `top_k` passes over a block
# several times: 1,000 new papers against 105,000 took a median 0.86 s as one block of
# 420 MB, 0.56 s in blocks of 512 (215 MB), with the same lists.
BLOCK_ROWS = 512
TOP_K_ROWS = 128
# `top_k` ranks at most this many times k candidates a row before it partitions instead.
TOP_K_SURVIVORS = 16
TOPIC_TERMS = 8
SILHOUETTE_SAMPLE = 2000
TOPIC_MATCH_MIN = 0.9  # centroid cosine at which a topic counts as the same topic
# Tables built by sql/<name>.sql, in dependency order (flows/core/tables.py).
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
# Most near-duplicate pairs kept per paper (its closest): a corpus of many copies then
# costs memory linear in its size; duplicate_groups still holds every copy.
PAIR_CAP = 32


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
    """Top-k neighbours of every paper, and its pairs at cosine >= `threshold` (at most
    PAIR_CAP a paper: its closest).

    Exact (blockwise matrix products) up to `exact_max` papers, an HNSW graph above it:
    exact work grows with n^2 and the graph's with about n log n.

    Returns:
        top-k (paper_id, neighbor_id, score) and pairs (same columns).
    """
    found = candidates(ids, vectors, max(k, PAIR_CAP), threshold, method, exact_max)
    top, pairs = split_candidates(found, k, threshold)
    return top.sort("paper_id", maintain_order=True), pairs.sort("paper_id", maintain_order=True)


Triples = tuple[np.ndarray, np.ndarray, np.ndarray]  # row, column, score
CANDIDATE_SCHEMA = {"paper_id": pl.String, "neighbor_id": pl.String, "score": pl.Float64}
# A paper's candidates best first, ties by neighbour id: the order lists are kept in.
BEST_FIRST = {"by": ["paper_id", "score", "neighbor_id"], "descending": [False, True, False]}


def candidates(
    ids: list[str],
    vectors: np.ndarray,
    width: int,
    threshold: float,
    method: str = "auto",
    exact_max: int = 20_000,
) -> pl.DataFrame:
    """Each paper's `width` nearest other papers: paper_id, neighbor_id, score; a paper's
    rows together, best first (ties: by neighbour id).

    Top-k neighbours and near-duplicate pairs are both read off these lists, and the next
    version updates them instead of searching again (`update_candidates`).
    """
    n = len(ids)
    if n == 0:
        return pl.DataFrame(schema=CANDIDATE_SCHEMA)
    if neighbor_method(method, n, exact_max) == "exact":
        found = exact_rows(vectors, np.arange(n), width)
    else:
        found = graph_rows(build_graph(vectors), vectors, 0, n, width, threshold)
    return id_frame(ids, *found)


def trim_lists(found: pl.DataFrame, k: int, threshold: float) -> pl.DataFrame:
    """What the neighbours and pairs read of each list (`split_candidates`): its first
    `k` rows, and further rows where they score `threshold` or more. Lists kept so hold a
    paper's top k and its near-duplicates (about 10 rows a paper, not the width of 32)."""
    return found.filter(
        (pl.int_range(pl.len()).over("paper_id") < k) | (pl.col("score") >= threshold)
    )


def split_candidates(
    found: pl.DataFrame, k: int, threshold: float
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The top-k of each paper's candidates, with their rank (1 = nearest), and those >=
    threshold, in the order of `found` (a paper's rows together and best first, as
    `candidates` and `update_candidates` make them: no sort of millions of rows)."""
    runs = paper_runs(found)
    if runs is not None:
        # Ranks counted along the runs: 1,060,000 rows in 0.03 s, where ranking over
        # paper_id groups took 0.12 s.
        lengths = runs["len"].to_numpy().astype(np.int64)
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
        rank = pl.Series("rank", np.arange(found.height, dtype=np.int64) - starts + 1)
    else:
        rank = pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("paper_id").alias("rank")
    top = found.with_columns(rank).filter(pl.col("rank") <= k)
    return top, found.filter(pl.col("score") >= threshold)


def paper_runs(rows: pl.DataFrame) -> pl.DataFrame | None:
    """The runs of equal paper_id in `rows` (value, len), where each paper's rows are one
    run; None where a paper's rows lie apart."""
    runs = rows.select(pl.col("paper_id").rle()).unnest("paper_id")
    return runs if runs["value"].n_unique() == runs.height else None


def exact_rows(
    vectors: np.ndarray,
    rows: np.ndarray,
    width: int,
    seen: Callable[[np.ndarray, np.ndarray], None] | None = None,
) -> Triples:
    """The `width` nearest other papers of the papers at `rows`, against every paper.

    Rows go in blocks of BLOCK_ROWS; the products pick each row's candidates and
    `pair_scores` scores them, so ranges split across workers get the scores of one
    process bit for bit. `seen(here, block)`, where given, reads each block's products
    (rows `here` against every paper, self excluded) as well.
    """
    n = len(vectors)
    take = min(width, n - 1)  # self is excluded: at most n - 1 neighbours
    if take <= 0 or not len(rows):
        return concat_triples([])
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    parts = []
    with blas_threads():
        for start in range(0, len(rows), BLOCK_ROWS):
            here = np.asarray(rows[start : start + BLOCK_ROWS], dtype=np.int64)
            block = matrix[here] @ matrix.T
            block[np.arange(len(here)), here] = -np.inf  # not its own neighbour
            if seen:
                seen(here, block)
            # One top-k serves both the k nearest and at most PAIR_CAP pairs per paper, so
            # memory stays linear in n even when every paper is a copy of every other.
            cols, _ = top_k(block, take)
            rows_of = np.repeat(here, take)
            scores = pair_scores(matrix, rows_of, cols.reshape(-1)).reshape(-1, take)
            # Best first by the exact scores (ties: by column), as every path lists them.
            order = np.lexsort((cols, -scores), axis=1)
            cols, scores = np.take_along_axis(cols, order, 1), np.take_along_axis(scores, order, 1)
            parts.append((rows_of, cols.reshape(-1), scores.reshape(-1)))
    return concat_triples(parts)


PAIR_CHUNK = 8192  # pairs scored at a time: 25 MB of float64 rows


def pair_scores(matrix: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The cosine of each (row, col) pair of unit rows of `matrix`, summed in float64 and
    given as float32: the same bits on every machine and worker for the same vectors.

    A float32 matrix product's last bit depends on the BLAS kernel, its threads and the
    block's shape (OpenBLAS on AVX2 gives 1e-7 differences between 1 and 2 threads, and
    between a block of rows and the same rows within a larger one), and published scores
    (6 decimals) would then differ between one process and a cluster's workers. The
    products only select the candidates; their scores are these.
    """
    out = np.empty(len(rows), dtype=np.float32)
    for start in range(0, len(rows), PAIR_CHUNK):
        a = matrix[rows[start : start + PAIR_CHUNK]].astype(np.float64)
        b = matrix[cols[start : start + PAIR_CHUNK]].astype(np.float64)
        out[start : start + len(a)] = np.einsum("ij,ij->i", a, b)
    return out


def top_k(block: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns and scores of each row's k highest scores, highest first.

    Cut the row into k chunks: each holds a score at least its chunk's maximum, so at
    least k scores of the row reach the least of those k maxima. Only those few are
    ranked: 0.23 s for 1,000 rows of 100,000 scores, where partitioning every row takes
    1.2 s. Rows where too many scores tie at the top (copies of one paper) are partitioned.
    """
    rows, n = block.shape
    width = n // k
    if width >= 8:
        floor = block[:, : k * width].reshape(rows, k, width).max(axis=2).min(axis=1)
        above = block >= floor[:, None]
        counts = above.sum(axis=1)
        # Counted before the candidates are listed: rows of copies would list every score.
        if counts.sum() <= rows * TOP_K_SURVIVORS * k and (counts >= k).all():
            row, col = positions(above)
            scores = block[row, col]
            order = np.lexsort((col, -scores, row))  # by row, score down, then column
            firsts = np.concatenate(([0], np.cumsum(counts)[:-1]))
            pick = order[(firsts[:, None] + np.arange(k)).reshape(-1)]
            return col[pick].reshape(rows, k).astype(np.int64), scores[pick].reshape(rows, k)
    return top_k_by_partition(block, k)


def positions(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of a 2-D mask's true cells, in row order: `np.nonzero` gives the
    same, but scans 1,000 x 113,000 cells in 0.3-0.45 s where the flat scan takes 0.03 s."""
    return np.divmod(np.flatnonzero(mask), mask.shape[1])


def top_k_by_partition(block: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """`top_k` by partitioning each row, TOP_K_ROWS rows at a time: partitioning a block of
    1,000 rows of 100,000 scores whole takes 3.5 s, piece by piece 1.2 s (the index arrays
    stay in cache)."""
    cols_out = np.empty((len(block), k), dtype=np.int64)
    scores_out = np.empty((len(block), k), dtype=block.dtype)
    for start in range(0, len(block), TOP_K_ROWS):
        part = block[start : start + TOP_K_ROWS]
        cols = np.argpartition(-part, k - 1, axis=1)[:, :k]
        scores = np.take_along_axis(part, cols, axis=1)
        order = np.argsort(-scores, axis=1, kind="stable")
        cols_out[start : start + len(part)] = np.take_along_axis(cols, order, axis=1)
        scores_out[start : start + len(part)] = np.take_along_axis(scores, order, axis=1)
    return cols_out, scores_out


def blas_threads():
    """Matrix products on this process's share of the cores (see compute_threads)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(compute_threads(), user_api="blas")


def update_candidates(
    ids: list[str],
    vectors: np.ndarray,
    width: int,
    previous: pl.DataFrame,
    previous_ids: list[str],
    k: int,
    threshold: float,
) -> pl.DataFrame:
    """`candidates` (exact) as `trim_lists` keeps them, from the lists of a previous set of
    papers: work grows with the papers added or removed times all papers, never with all
    papers squared.

    New papers are searched against all; an old paper's list gains the new papers that
    enter it; an old paper that lost a listed neighbour is searched again. Equal to
    searching everything again, up to float rounding of the scores. Lists that no new
    paper enters are kept as they are, in their rows.

    Args:
        previous: the candidate lists of `previous_ids` (vectors unchanged since), trimmed
            (`trim_lists`) by the same `k` and `threshold`.
    """
    n = len(ids)
    take = min(width, n - 1)
    if n == 0 or take <= 0:
        return pl.DataFrame(schema=CANDIDATE_SCHEMA)
    current = pl.Series(ids, dtype=pl.String)
    position = pl.DataFrame({"paper_id": current, "row": np.arange(n, dtype=np.int64)})
    gone = pl.Series(sorted(set(previous_ids).difference(ids)), dtype=pl.String)
    kept = previous.filter(pl.col("paper_id").is_in(current.implode()))
    broken = kept.filter(pl.col("neighbor_id").is_in(gone.implode()))["paper_id"].unique()
    intact = kept.filter(~pl.col("paper_id").is_in(broken.implode()))
    # A list shorter than k (the set was smaller) could miss old papers: search again.
    ends = list_ends(intact).join(position, on="paper_id")
    whole = ends.filter(pl.col("len") >= min(k, take))
    intact = intact.filter(pl.col("paper_id").is_in(whole["paper_id"].implode()))
    is_new = ~current.is_in(pl.Series(previous_ids, dtype=pl.String).implode()).to_numpy()
    listed = np.zeros(n, bool)
    listed[whole["row"].to_numpy()] = True
    search = np.flatnonzero(~listed)  # new papers and old ones whose lists broke
    # Only lists a new paper enters change: their lowest score is what a newcomer must
    # reach (no other paper's list takes one). The new papers' products with all papers,
    # made for their own lists, tell which.
    # A list of fewer than `take` rows was trimmed: a newcomer at the threshold enters it
    # too (a float32 at or below it: one that enters in vain is trimmed again).
    at_threshold = np.nextafter(np.float32(threshold), np.float32(-np.inf))
    short = (whole["len"] < take).to_numpy()
    floor = whole["floor"].to_numpy().astype(np.float32)  # float32 scores
    floors = np.full(n, np.inf, dtype=np.float32)
    floors[whole["row"].to_numpy()] = np.where(short, np.minimum(floor, at_threshold), floor)
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    parts: list[Triples] = []

    def enter(here: np.ndarray, block: np.ndarray) -> None:
        fresh = np.flatnonzero(is_new[here])
        for start in range(0, len(fresh), TOP_K_ROWS):  # a few rows at a time
            rows = fresh[start : start + TOP_K_ROWS]
            # Rows in a run are sliced, not gathered: 1,000 rows of 108,000 products
            # compared in 0.07 s where 0.17 s.
            together = rows[-1] - rows[0] + 1 == len(rows)
            part = block[rows[0] : rows[-1] + 1] if together else block[rows]
            at, old = positions(part >= floors)
            newcomers = here[rows][at]
            parts.append((old, newcomers, pair_scores(matrix, old, newcomers)))

    searched = trim_lists(id_frame(ids, *exact_rows(matrix, search, width, enter)), k, threshold)
    came = id_frame(ids, *concat_triples(parts))
    gaining = came["paper_id"].unique().implode()
    rank = pl.int_range(pl.len()).over("paper_id")
    merged = (
        pl.concat([intact.filter(pl.col("paper_id").is_in(gaining)), came])
        .sort(**BEST_FIRST)
        .filter((rank < take) & ((rank < k) | (pl.col("score") >= threshold)))
    )
    return pl.concat([searched, merged, intact.filter(~pl.col("paper_id").is_in(gaining))])


def list_ends(lists: pl.DataFrame) -> pl.DataFrame:
    """Each paper's list length and lowest score: paper_id, len, floor.

    Lists kept as NeighbourLists keeps them (each paper's rows together, best first) give
    both from their runs of equal paper_id in 0.05 s at 3.5 million rows, where grouping
    takes 0.25 s; lists in any other order are grouped.
    """
    runs = paper_runs(lists)
    if runs is not None:
        ends = runs["len"].cum_sum().to_numpy().astype(np.int64) - 1
        scores = lists["score"].to_numpy()
        falling = np.diff(scores) <= 0  # within each run; a run's end may rise to the next
        falling[ends[:-1]] = True
    if runs is None or not falling.all():
        return lists.group_by("paper_id").agg(pl.len(), floor=pl.col("score").min())
    return pl.DataFrame({"paper_id": runs["value"], "len": runs["len"], "floor": scores[ends]})


def row_blocks(n: int, pieces: int) -> list[tuple[int, int]]:
    """Rows [0, n) cut into about `pieces` ranges on BLOCK_ROWS boundaries."""
    blocks = -(-n // BLOCK_ROWS)
    per = max(1, -(-blocks // max(1, pieces))) * BLOCK_ROWS
    return [(start, min(start + per, n)) for start in range(0, n, per)]


def nearest_in_pieces(
    ids: list[str],
    vectors: np.ndarray,
    width: int,
    threshold: float,
    method: str,
    exact_max: int,
    workdir: Path,
    fan: Callable[[list[tuple[int, int]], Path, Path | None], list[Triples]],
    pieces: int,
) -> pl.DataFrame:
    """`candidates`, the search split into ranges of query rows that `fan` runs elsewhere.

    The matrix (and for hnsw the graph, built here) is written once to `workdir` for the
    workers to read; `fan` maps the row ranges, the matrix file and the graph file (None
    for exact search) to each range's triples, through `search_rows`.
    """
    if not len(ids):
        return pl.DataFrame(schema=CANDIDATE_SCHEMA)
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
    return id_frame(ids, *concat_triples(parts))


def search_rows(
    rows: tuple[int, int], matrix: Path, graph: Path | None, width: int, threshold: float
) -> Triples:
    """One range of query rows of `nearest_in_pieces`, from its files (on a worker)."""
    vectors = np.load(matrix)
    if graph is None:
        return exact_rows(vectors, np.arange(*rows), width)
    import faiss

    return graph_rows(faiss.read_index(str(graph)), vectors, *rows, width, threshold)


def build_graph(vectors: np.ndarray):
    """A FAISS HNSW graph of `vectors` (inner product), built on one thread."""
    import faiss

    index = faiss.IndexHNSWFlat(vectors.shape[1], HNSW_LINKS, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = HNSW_BUILD_BREADTH
    faiss.omp_set_num_threads(1)
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def graph_rows(
    index, vectors: np.ndarray, first: int, stop: int, width: int, threshold: float
) -> Triples:
    """Graph search for the papers in rows [first, stop): their `width` nearest.

    A paper whose graph neighbours all lie above `threshold` may have closer ones the
    graph missed (a crowd of copies): its row is searched exactly.
    """
    import faiss

    faiss.omp_set_num_threads(compute_threads())
    n = len(vectors)
    data = np.ascontiguousarray(vectors, dtype=np.float32)
    fetch = min(n, width + 1)  # + 1: a paper finds itself
    index.hnsw.efSearch = max(HNSW_SEARCH_BREADTH, fetch)
    scores, cols = index.search(data[first:stop], fetch)
    order = np.lexsort((cols, -scores), axis=-1)  # best first, ties by neighbour id
    scores, cols = np.take_along_axis(scores, order, 1), np.take_along_axis(cols, order, 1)
    rows = np.repeat(np.arange(first, stop), fetch).reshape(stop - first, fetch)
    keep = (cols >= 0) & (cols != rows)
    keep &= np.cumsum(keep, axis=1) <= width  # self and empty slots dropped, then cut
    crowded = first + np.flatnonzero((keep & (scores >= threshold)).sum(axis=1) >= fetch - 1)
    keep &= ~np.isin(rows, crowded)
    listed = (rows[keep], cols[keep].astype(np.int64), scores[keep])
    return concat_triples([listed, exact_rows(vectors, crowded, width)])


def concat_triples(parts: list[Triples]) -> Triples:
    if not parts:
        return np.array([], np.int64), np.array([], np.int64), np.array([], np.float32)
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def id_frame(ids: list[str], rows: np.ndarray, cols: np.ndarray, scores: np.ndarray):
    """(paper_id, neighbor_id, score) from row and column positions in `ids`."""
    names = pl.Series(ids, dtype=pl.String)
    return pl.DataFrame(
        {
            "paper_id": names.gather(np.asarray(rows, dtype=np.int64)),
            "neighbor_id": names.gather(np.asarray(cols, dtype=np.int64)),
            "score": pl.Series(np.asarray(scores).astype(np.float64)),
        }
    )


def group_pairs(pairs: pl.DataFrame) -> pl.DataFrame:
    """Near-duplicate groups: the connected components of the pairs graph.

    Returns:
        pair_groups: paper_id, group_id (the smallest paper_id of its group) and
        group_size, for every paper in a pair.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    schema = {"paper_id": pl.String, "group_id": pl.String, "group_size": pl.Int64}
    edges = pairs.filter(pl.col("paper_id") != pl.col("neighbor_id"))
    members = pl.concat([edges["paper_id"], edges["neighbor_id"]]).unique().sort()
    if members.is_empty():
        return pl.DataFrame(schema=schema)
    position = {paper: i for i, paper in enumerate(members.to_list())}
    rows = np.fromiter((position[p] for p in edges["paper_id"]), np.int64, edges.height)
    cols = np.fromiter((position[p] for p in edges["neighbor_id"]), np.int64, edges.height)
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(members),) * 2)
    _, labels = connected_components(graph, directed=False)
    return (
        pl.DataFrame({"paper_id": members, "component": labels})
        .with_columns(
            group_id=pl.col("paper_id").min().over("component"),
            group_size=pl.len().over("component").cast(pl.Int64),
        )
        .select(list(schema))
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


TOPIC_MIN_PAPERS = 10  # fewest papers a new topic forms from
# How many standard errors a group's papers must lie closer to one another than to their
# old topics to become a topic (`stands_apart`).
TOPIC_GROUP_T = 3.0
# Share of papers that fit no old topic (or form new ones), above which topics are re-fit.
TOPIC_DRIFT_MAX = 0.25
# Most open papers (new, or outliers near new ones) grouped at once: a part (`linked_parts`)
# of more is cut into pieces of at most this many (`cut_parts`). Memory grows with the
# square of a piece: 5,000 rows hold 200 MB of distances.
TOPIC_OUTLIERS_MAX = 5000
# Up to this many open papers are grouped at once; more are grouped part by part.
LINKED_PARTS_ROWS = 4096
# Cosine between a carried-over topic's centroid and its papers' mean down to which the
# centroid stays (`topic_frames`): 0.999 is 2.6 degrees, as far as about 4% of a topic's
# papers changing moves it (generated abstracts); a run adding 1% leaves most topics, and
# their papers' rows, as they were.
TOPIC_CENTROID_HOLD = 0.999


def warm_up() -> None:
    """Import the scikit-learn parts topics and the map use (about 0.4 s) now, in a process
    that serves many runs (`serve`)."""
    from scipy.cluster.hierarchy import fcluster, linkage  # noqa: F401
    from sklearn.cluster import KMeans  # noqa: F401
    from sklearn.decomposition import PCA  # noqa: F401
    from sklearn.manifold import TSNE  # noqa: F401
    from sklearn.metrics import silhouette_score  # noqa: F401


def cluster_topics(
    ids: list[str],
    vectors: np.ndarray,
    n_topics: int | None,
    seed: int,
    previous: dict[int, np.ndarray] | None = None,
    refit: bool = False,
    previous_papers: pl.Series | None = None,
    previous_assignments: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, str]:
    """Topics of unit vectors, carried over from the previous version where there is one.

    With previous topics (and no `n_topics` or `refit`), papers keep their topic and new
    papers join their nearest (`update_topics`), and papers that fit none become new
    topics once they form a dense group, as online topic models do; ids persist.
    Otherwise, or when too many papers fit no topic (drift), seeded k-means fits afresh; a
    cluster whose centroid matches an old topic still keeps that topic's id; other
    clusters take new ids, larger first.

    Returns:
        paper_topics (paper_id, topic_id, cosine distance to the centroid),
        topic_centroids (topic_id, centroid) and what was done, for the run's log.
    """
    if len(ids) == 0:
        return *topic_frames(ids, vectors, np.zeros(0, np.int64), {}), "no papers"
    why = "fit"
    if previous and n_topics is None and not refit:
        updated = update_topics(ids, vectors, previous, previous_papers, previous_assignments)
        if updated is not None:
            labels, topic_of, note = updated
            held = {label: previous[t] for label, t in topic_of.items() if t in previous}
            return *topic_frames(ids, vectors, labels, topic_of, held), note
        why = f"re-fit: more than {TOPIC_DRIFT_MAX:.0%} of papers fit no old topic (drift)"
    elif previous and refit:
        why = "re-fit on request"
    from sklearn.cluster import KMeans

    k = choose_topic_count(vectors, n_topics, seed)
    model = KMeans(n_clusters=k, random_state=seed, n_init=4).fit(vectors.astype(np.float64))
    centroids = unit_rows(model.cluster_centers_)
    kept = match_topics(centroids, previous or {})
    labels = model.labels_.astype(np.int64)
    next_id = max(previous, default=-1) + 1 if previous else 0
    topic_of: dict[int, int] = {}
    for cluster in clusters_by_size(ids, labels):
        if cluster in kept:
            topic_of[cluster] = kept[cluster]
        else:
            topic_of[cluster], next_id = next_id, next_id + 1
    return *topic_frames(ids, vectors, labels, topic_of), f"{why}: {k} topics"


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def clusters_by_size(ids: list[str], labels: np.ndarray) -> list[int]:
    """Cluster labels, largest first (ties: the one holding the smallest paper id)."""
    raw = pl.DataFrame({"paper_id": ids, "cluster": labels})
    return (
        raw.group_by("cluster")
        .agg(size=pl.len(), first=pl.col("paper_id").min())
        .sort(["size", "first"], descending=[True, False])["cluster"]
        .to_list()
    )


def update_topics(
    ids: list[str],
    vectors: np.ndarray,
    previous: dict[int, np.ndarray],
    previous_papers: pl.Series | None = None,
    previous_assignments: pl.DataFrame | None = None,
) -> tuple[np.ndarray, dict[int, int], str] | None:
    """Carry the previous topics over: each paper keeps its topic (`carried_topics`) and
    new papers join their nearest, and new papers and papers that fit no topic form new
    topics where they make a dense group. None when the topics drifted.

    A paper fits no topic when its cosine to its topic's centroid lies below that topic's
    usual range (median - 3 MADs of its papers' cosines); it goes to its nearest topic.
    The papers the previous version did not hold, and the papers that fit no topic near
    one of them (`near_rows`), are grouped by average-linkage clustering (a group's
    papers as close to one another as those of a loose old topic, `topic_closeness`); a
    group of TOPIC_MIN_PAPERS or more whose papers lie closer to the rest of the group
    than to their old topics, beyond chance (`stands_apart`), becomes a new topic with a
    new id.

    Returns:
        a label per paper, label -> topic id, and what was done.
    """
    old_ids = sorted(previous)
    centroids = unit_rows(np.stack([previous[t] for t in old_ids]).astype(np.float32))
    nearest, best = carried_topics(ids, vectors, centroids, old_ids, previous_assignments)
    floor = np.full(len(old_ids), -np.inf)
    for rows in rows_by_label(nearest, np.arange(len(ids))):
        mine = best[rows]
        if len(mine) >= 5:
            median = np.median(mine)
            floor[nearest[rows[0]]] = median - 3 * 1.4826 * np.median(np.abs(mine - median))
    outlier = best < floor[nearest]
    if outlier.any():  # to the nearest topic, which new topics may yet take them from
        nearest[outlier], best[outlier] = nearest_centroids(vectors[outlier], centroids)
    known = previous_papers is not None and previous_papers.len() > 0
    if known:
        fresh_paper = ~pl.Series(ids, dtype=pl.String).is_in(previous_papers.implode()).to_numpy()
    else:
        fresh_paper = outlier
    open_rows = np.flatnonzero(outlier | fresh_paper)
    if outlier.mean() > TOPIC_DRIFT_MAX:
        return None
    groups = new_groups(vectors, nearest, best, open_rows, fresh_paper if known else None)
    groups.sort(key=lambda g: (-len(g), min(ids[i] for i in g)))
    fresh = [unit_rows(vectors[g].mean(axis=0, keepdims=True))[0] for g in groups]
    every = np.vstack([centroids, *fresh]) if fresh else centroids
    added = np.arange(len(old_ids), len(every))
    labels, best = renearest(vectors, nearest, best, every, added)
    # One k-means step: centroids follow their papers (old ones once they moved more than
    # TOPIC_CENTROID_HOLD allows, as `topic_frames` does), and papers the nearer centroid.
    moved = every.copy()
    present, means = label_means(vectors, labels)
    for label, mean in zip(present, means, strict=True):
        if label >= len(old_ids) or mean @ every[label] < TOPIC_CENTROID_HOLD:
            moved[label] = mean
    changed = np.flatnonzero((moved != every).any(axis=1))
    labels, _ = renearest(vectors, labels, best, moved, changed)
    if (outlier | (labels >= len(old_ids))).mean() > TOPIC_DRIFT_MAX:
        return None  # too much lies outside the old topics: fit afresh
    topic_of = {t: old_ids[t] for t in range(len(old_ids))}
    next_id = max(old_ids) + 1
    for g in range(len(fresh)):
        topic_of[len(old_ids) + g] = next_id + g
    joined = int((labels >= len(old_ids)).sum())
    note = (
        f"updated: {int(fresh_paper.sum()) if known else 0} papers new, "
        f"{int(outlier.sum())} fit no topic; {len(fresh)} new topics ({joined} papers)"
    )
    return labels.astype(np.int64), topic_of, note


def new_groups(
    vectors: np.ndarray,
    labels: np.ndarray,
    best: np.ndarray,
    open_rows: np.ndarray,
    fresh: np.ndarray | None,
) -> list[np.ndarray]:
    """The groups of `open_rows` (papers new or fitting no topic) that become new topics
    (`update_topics`). With `fresh` (whether each paper is new), outliers are grouped only
    near a new paper (`near_rows`). Fewer than TOPIC_MIN_PAPERS open papers form none, and
    nothing is computed for them (a +1 run). Above LINKED_PARTS_ROWS open papers they are
    grouped part by part (`linked_parts`), and a part of more than TOPIC_OUTLIERS_MAX is
    cut into pieces of at most that many first (`cut_parts`).

    Args:
        labels, best: each paper's topic and its cosine to that topic's centroid.
    """
    if len(open_rows) < TOPIC_MIN_PAPERS:
        return []
    settled = np.ones(len(vectors), bool)
    settled[open_rows] = False
    closeness = topic_closeness(vectors, labels, settled)
    if fresh is not None:  # the outliers a new group could hold: those near a new paper
        open_rows = near_rows(vectors, open_rows[~fresh[open_rows]], np.flatnonzero(fresh),
                              closeness)  # fmt: skip
        if len(open_rows) < TOPIC_MIN_PAPERS:
            return []
    rows, parts = vectors[open_rows], None
    if len(open_rows) > min(LINKED_PARTS_ROWS, TOPIC_OUTLIERS_MAX):
        parts = cut_parts(rows, linked_parts(rows, 1 - closeness), TOPIC_OUTLIERS_MAX)
    grouped = average_linkage(rows, 1 - closeness, parts)
    groups = []
    for label in np.unique(grouped):
        members = open_rows[grouped == label]
        if len(members) < TOPIC_MIN_PAPERS:
            continue
        if stands_apart(closeness_to_the_rest(vectors[members]) - best[members]):
            groups.append(members)
    return groups


def carried_topics(
    ids: list[str],
    vectors: np.ndarray,
    centroids: np.ndarray,
    old_ids: list[int],
    assignments: pl.DataFrame | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each paper's topic (its position in `old_ids`, the topics of `centroids`) and its
    cosine to that topic's centroid: the topic `assignments` (paper_id, topic_id: the last
    version's) gave it, else its nearest.

    A paper stays in its topic while it fits there: matching every paper against every
    centroid again moved about 600 of 105,000 papers a run (1% new) between topics whose
    centroids lie about equally near, and cost a product of all papers with all topics.
    """
    at = np.full(len(ids), -1, np.int64)
    if assignments is not None and assignments.height:
        positions = pl.DataFrame(
            {"topic_id": old_ids, "at": np.arange(len(old_ids))},
            schema={"topic_id": pl.Int64, "at": pl.Int64},
        )
        given = assignments.select("paper_id", pl.col("topic_id").cast(pl.Int64))
        placed = given.join(positions, on="topic_id")
        papers = pl.DataFrame({"paper_id": ids}, schema={"paper_id": pl.String})
        found = papers.join(placed, on="paper_id", how="left", maintain_order="left")
        at = np.array(found["at"].fill_null(-1).to_numpy(), dtype=np.int64)  # writable
    best = np.empty(len(ids), np.float32)
    kept = np.flatnonzero(at >= 0)
    for start in range(0, len(kept), 65536):
        rows = kept[start : start + 65536]
        best[rows] = np.einsum("ij,ij->i", vectors[rows], centroids[at[rows]])
    rest = np.flatnonzero(at < 0)
    if len(rest):
        at[rest], best[rest] = nearest_centroids(vectors[rest], centroids)
    return at, best


def closeness_to_the_rest(members: np.ndarray) -> np.ndarray:
    """Each row's cosine to the mean of the other rows. A group's own centre holds a tenth
    of each of its 10 papers, which lifts their cosines to it: against the centre of all,
    11 of 21 groups of chance neighbours among 1,000 new generated abstracts seemed closer
    than to the papers' old topics and became topics."""
    rest = members.sum(axis=0, dtype=np.float64) - members
    lengths = np.maximum(np.linalg.norm(rest, axis=1), 1e-12)
    return np.einsum("ij,ij->i", members, rest) / lengths


def stands_apart(gain: np.ndarray) -> bool:
    """Whether a group's papers lie closer to one another than to their old topics beyond
    chance: `gain` (each paper's cosine to the rest of the group less its cosine to its
    old topic) averages TOPIC_GROUP_T standard errors above 0 or more.

    Chance groups among 1,000 new generated abstracts reached 0.4 (one of 21 above 0);
    new themes in the tests reach 72 to 141, and the group the 38 ICLR 2026 papers make
    among 826 real abstracts (20 papers) 5.1.
    """
    if len(gain) < 2:
        return False
    spread = gain.std(ddof=1) / np.sqrt(len(gain))
    return bool(gain.mean() > TOPIC_GROUP_T * spread) if spread > 0 else bool(gain.mean() > 0)


def near_rows(
    vectors: np.ndarray, outliers: np.ndarray, fresh: np.ndarray, closeness: float
) -> np.ndarray:
    """The rows `fresh` and those of `outliers` whose cosine to one of them reaches
    `closeness`, ascending: new papers and the papers that fit no topic which a group of
    new papers could gather. Papers that fit no topic accumulate until new ones come
    near them; a run groups what came with it and the outliers around that, not every
    outlier the warehouse holds (about 1.8% of its papers: 1,900 at 100,000)."""
    near = np.zeros(len(outliers), bool)
    if len(fresh):
        theirs = vectors[fresh].T
        for start in range(0, len(outliers), 4096):
            block = vectors[outliers[start : start + 4096]] @ theirs
            near[start : start + 4096] = block.max(axis=1) >= closeness
    return np.sort(np.concatenate([fresh, outliers[near]]))


def average_linkage(
    rows: np.ndarray, distance: float, parts: np.ndarray | None = None
) -> np.ndarray:
    """A group label per row: average-linkage clustering by cosine distance, merging while
    groups lie less than `distance` apart (as scikit-learn's AgglomerativeClustering with
    that distance_threshold); with `parts` (`linked_parts` of the rows), part by part.

    The distances come from one float64 matrix product, not scipy's pdist (which
    scikit-learn calls): 3,000 rows of 384 are grouped in 0.27 s where scikit-learn takes
    1.0 s, 0.9 s of it in pdist. The distances differ from pdist's by 1e-15 at most.
    """
    if parts is None:
        return linkage_groups(rows, distance)
    labels = np.empty(len(rows), np.int64)
    for members in rows_by_label(parts, np.arange(len(rows))):
        labels[members] = linkage_groups(rows[members], distance) + len(rows) * parts[members[0]]
    return labels


def linkage_groups(rows: np.ndarray, distance: float) -> np.ndarray:
    """`average_linkage` of all `rows` at once: labels from 1 up."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    if len(rows) < 2:
        return np.ones(len(rows), dtype=np.int64)
    unit = rows.astype(np.float64)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    distances = unit @ unit.T
    np.subtract(1.0, distances, out=distances)
    np.maximum(distances, 0.0, out=distances)
    np.fill_diagonal(distances, 0.0)
    tree = linkage(squareform(distances, checks=False), method="average")
    # fcluster keeps merges at most t apart; scikit-learn those below the threshold.
    below = np.nextafter(distance, -np.inf)
    return fcluster(tree, t=below, criterion="distance").astype(np.int64)


def linked_parts(rows: np.ndarray, distance: float) -> np.ndarray:
    """A part label per row: the connected parts of the graph that joins rows less than
    `distance` apart (cosine). Average linkage merges two groups only where some pair of
    their rows lies that near, so each of its groups lies within one part: the parts can be
    grouped one by one, and the largest part, not all rows, sets the memory (10,000 rows
    grouped at once hold 800 MB of distances).

    The products are float32 in blocks of rows, and pairs within 1e-5 of `distance` are
    joined too: a part may hold more rows than it needs, never fewer.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(rows)
    unit = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    floor = np.float32(1.0 - distance - 1e-5)
    head = np.arange(n)  # each row's part so far, named by its first row
    for start in range(0, n, 2048):
        near, other = positions(unit[start : start + 2048] @ unit.T >= floor)
        ends = (np.concatenate([start + near, np.arange(n)]), np.concatenate([other, head]))
        graph = csr_matrix((np.ones(len(ends[0]), np.int32), ends), shape=(n, n))
        _, labels = connected_components(graph, directed=False)
        head = np.unique(labels, return_index=True)[1][labels]
    return np.unique(head, return_inverse=True)[1].astype(np.int64)


def cut_parts(rows: np.ndarray, parts: np.ndarray, limit: int) -> np.ndarray:
    """`parts` (a part label per row) with each part of more than `limit` rows cut in two
    by seeded k-means, and the pieces again, until none holds more: average linkage then
    runs on at most `limit` rows at a time.

    A group that k-means cuts is grouped as two, each of which may still become a topic: a
    theme of more than `limit` open papers at once becomes several topics. Before, such a
    part re-fit every topic: at 300,000 generated abstracts, where the open papers of
    every +1% run lie in one part of about 8,000, each run took 145 s for the fit where
    the update takes 2 s. Rows k-means cannot tell apart (copies) are cut in halves.
    """
    from sklearn.cluster import KMeans

    labels = parts.copy()
    pending = [m for m in rows_by_label(parts, np.arange(len(rows))) if len(m) > limit]
    fresh_label = int(labels.max(initial=-1)) + 1
    while pending:
        members = pending.pop()
        with warnings.catch_warnings():  # copies: k-means finds one cluster, and says so
            warnings.simplefilter("ignore")
            model = KMeans(n_clusters=2, n_init=1, random_state=0)
            side = model.fit_predict(rows[members].astype(np.float64)) == 1
        if side.all() or not side.any():
            side = np.arange(len(members)) >= len(members) // 2
        labels[members[side]] = fresh_label
        fresh_label += 1
        pending += [piece for piece in (members[~side], members[side]) if len(piece) > limit]
    return labels


def topic_closeness(vectors: np.ndarray, labels: np.ndarray, settled: np.ndarray) -> float:
    """How close the papers of a loose but real topic lie to one another: the lower
    quartile, over topics, of the mean cosine between a topic's settled papers (the first
    200 of each)."""
    closeness = []
    for rows in rows_by_label(labels, np.flatnonzero(settled)):
        members = vectors[rows[:200]].astype(np.float64)
        if len(members) >= 5:
            # The cosines of every pair add up to |sum|^2 less each vector's own, in
            # float64: 190 topics in 0.02 s where their matrix products took 0.04 s.
            total = members.sum(axis=0)
            pairs = total @ total - np.einsum("ij,ij->", members, members)
            closeness.append(pairs / (len(members) * (len(members) - 1)))
    return float(np.percentile(closeness, 25)) if closeness else 0.5


def rows_by_label(labels: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
    """`rows` parted by their label, ascending, each part in the order given: one sort, not
    a pass over every row for each label."""
    ordered = rows[np.argsort(labels[rows], kind="stable")]
    return np.split(ordered, np.flatnonzero(np.diff(labels[ordered])) + 1) if len(rows) else []


def renearest(
    vectors: np.ndarray,
    labels: np.ndarray,
    best: np.ndarray,
    centroids: np.ndarray,
    changed: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """`nearest_centroids(vectors, centroids)`, from each vector's nearest centroid and
    cosine (`labels`, `best`) among the same centroids but those at `changed` (moved or
    new): a vector whose own centroid changed is matched against all again, the others
    against the changed ones only (100,000 papers x a few topics, not x all of them)."""
    labels, best = labels.copy(), best.copy()
    if not len(changed):
        return labels, best
    again = np.flatnonzero(np.isin(labels, changed))
    part = centroids[changed]
    for start in range(0, len(vectors), 65536):
        sims = vectors[start : start + 65536] @ part.T
        top = sims.argmax(axis=1)
        score = sims[np.arange(len(sims)), top]
        better = np.flatnonzero(score > best[start : start + 65536])
        labels[start + better], best[start + better] = changed[top[better]], score[better]
    if len(again):
        labels[again], best[again] = nearest_centroids(vectors[again], centroids)
    return labels, best


def label_means(vectors: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The labels present and the normalised mean of each one's vectors, in one sparse
    product (one pass over the vectors a label took 0.15 s at 100,000 papers)."""
    from scipy.sparse import csr_matrix

    present, rows = np.unique(labels, return_inverse=True)
    onehot = csr_matrix(
        (np.ones(len(labels), np.float32), (rows, np.arange(len(labels)))),
        shape=(len(present), len(labels)),
    )
    return present, unit_rows(np.asarray(onehot @ vectors, dtype=np.float32))


def nearest_centroids(vectors: np.ndarray, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each vector's nearest centroid (position) and its cosine, in blocks of rows."""
    nearest = np.zeros(len(vectors), np.int64)
    best = np.zeros(len(vectors), np.float32)
    for start in range(0, len(vectors), 65536):
        sims = vectors[start : start + 65536] @ centroids.T
        nearest[start : start + 65536] = sims.argmax(axis=1)
        best[start : start + 65536] = sims.max(axis=1)
    return nearest, best


def topic_frames(
    ids: list[str],
    vectors: np.ndarray,
    labels: np.ndarray,
    topic_of: dict[int, int],
    held: dict[int, np.ndarray] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """paper_topics and topic_centroids from a label per paper and label -> topic id.

    Centroids are the normalised means of their papers; labels without papers are dropped.
    A label in `held` (a topic carried over) keeps that centroid while its papers' mean
    lies within TOPIC_CENTROID_HOLD of it: a few papers joining or leaving a topic leave
    the distances of its other papers, and so their rows, as they were.
    """
    schema = {"paper_id": pl.String, "topic_id": pl.Int32, "distance": pl.Float64}
    centroid_schema = {"topic_id": pl.Int32, "centroid": pl.List(pl.Float32)}
    if len(ids) == 0:
        return pl.DataFrame(schema=schema), pl.DataFrame(schema=centroid_schema)
    present, means = label_means(vectors, labels)
    centroids = {int(c): mean for c, mean in zip(present, means, strict=True)}
    for label, old in (held or {}).items():
        mean = centroids.get(label)
        if mean is not None and mean @ old / np.linalg.norm(old) >= TOPIC_CENTROID_HOLD:
            centroids[label] = old
    distance = centroid_distances(vectors, labels, centroids)
    assignments = pl.DataFrame(
        {
            "paper_id": ids,
            "topic_id": np.array([topic_of[int(c)] for c in labels], dtype=np.int32),
            "distance": distance.round(6),
        },
        schema=schema,
    ).sort("paper_id")
    topic_centroids = pl.DataFrame(
        {
            "topic_id": [topic_of[int(c)] for c in present],
            "centroid": pl.Series(
                [centroids[int(c)].astype(np.float32).tolist() for c in present],
                dtype=pl.List(pl.Float32),
            ),
        },
        schema=centroid_schema,
    ).sort("topic_id")
    return assignments, topic_centroids


def centroid_distances(
    vectors: np.ndarray, labels: np.ndarray, centroids: dict[int, np.ndarray]
) -> np.ndarray:
    """Each vector's cosine distance to its label's centroid, in float64 (a paper and a
    centroid that did not change give the same bits in every run, wherever its row lies)."""
    order = np.array(sorted(centroids))
    table = np.stack([centroids[int(c)] for c in order]).astype(np.float64)
    rows = np.searchsorted(order, labels)
    distance = np.empty(len(vectors))
    for start in range(0, len(vectors), 65536):
        part = vectors[start : start + 65536].astype(np.float64)
        own = table[rows[start : start + 65536]]
        distance[start : start + 65536] = 1.0 - np.einsum("ij,ij->i", part, own)
    return distance


def stopwords() -> pl.DataFrame:
    """Words left out of topic terms: scikit-learn's English list plus the academic filler
    in sql/seeds/academic_stopwords.csv (one word a line; extend it freely)."""
    academic = pl.read_csv(SQL_DIR / "seeds" / "academic_stopwords.csv")["word"].to_list()
    return pl.DataFrame({"word": sorted(english_stop_words() | set(academic))})


@lru_cache(maxsize=1)
def english_stop_words() -> frozenset[str]:
    """scikit-learn's English stop words, read from their own module: importing them
    through the package would load scikit-learn whole (a second or more) on every run."""
    spec = importlib.util.find_spec("sklearn")
    path = Path(spec.origin).parent / "feature_extraction" / "_stop_words.py"
    module = importlib.util.module_from_spec(
        importlib.util.spec_from_file_location("paperlake_sklearn_stop_words", path)
    )
    module.__spec__.loader.exec_module(module)
    return frozenset(module.ENGLISH_STOP_WORDS)


def mention_vocabulary() -> pl.DataFrame:
    """Benchmarks, datasets and metrics to look for: sql/seeds/mentions.csv (name, kind,
    RE2 pattern); extend the file to track more."""
    return pl.read_csv(SQL_DIR / "seeds" / "mentions.csv", infer_schema=False)


def stage_vocabulary(con: duckdb.DuckDBPyConnection) -> None:
    """Put the mention vocabulary in `con`, with all its patterns as one alternation, and
    the macros that read a mention's number and context (`mention_macros`)."""
    vocabulary = mention_vocabulary()
    con.register("vocabulary_frame", vocabulary)
    con.execute("create or replace table mention_vocabulary as select * from vocabulary_frame")
    con.unregister("vocabulary_frame")
    alternation = "|".join(f"(?:{pattern})" for pattern in vocabulary["pattern"])
    con.execute("set variable mention_pattern = ?", [alternation])
    macros = mention_macros(vocabulary["pattern"].to_list())
    con.execute(macros)
    # Kept beside them for PaperRows' key: reading macros back from duckdb_functions() takes
    # 30 ms a query (it lists the 2,900 functions DuckDB has). Their form for a few papers
    # too, which PaperRows defines while it reads those (`MACRO_ROWS_MAX`).
    con.execute("set variable macros = ?", [macros])
    each_row = mention_macros(vocabulary["pattern"].to_list(), each_row=True)
    con.execute("set variable macros_each_row = ?", [each_row])


# A query over at most this many papers calls the mention macros in their form that builds
# each regular expression from the row's pattern (`mention_macros(each_row=True)`): it
# compiles only the patterns that the papers mention, once per mention, where the other
# form compiles every pattern of the vocabulary once a query. The mentions of 1 paper take
# 10 ms against 77 ms; of 10,000, 4.4 s against 0.28 s.
MACRO_ROWS_MAX = 100


def mention_macros(patterns: list[str], each_row: bool = False) -> str:
    """sql/macros/mentions.sql with its "when 'PATTERN'" lines written once per pattern,
    each pattern quoted as a SQL string (see there).

    `each_row`: each macro is instead its branch with the row's pattern spliced into the
    regular expression (the same expression, so the same results), without the case."""
    quoted = list(dict.fromkeys(p.replace("'", "''") for p in patterns))
    lines = []
    for line in read_sql("macros/mentions").splitlines():
        branch = line.lstrip().startswith("when 'PATTERN'")
        if not each_row:
            lines += [line.replace("PATTERN", q) for q in quoted] if branch else [line]
        elif branch:
            expression = line.split(" then ", 1)[1]
            lines.append("    " + expression.replace("PATTERN", "' || pattern || '"))
        elif line.strip() == "end;":
            lines.append(";")
        elif line.strip() != "case pattern":
            lines.append(line)
    return "\n".join(lines)


# Tables of sql/ whose rows each come from one paper alone, and the other tables they read.
PER_PAPER_TABLES = {"mentions": ("mention_vocabulary",)}


@dataclass(frozen=True)
class PaperRowsUpdate:
    """A per-paper SQL's rows now and as the cache held them before this run.

    The rows are lazy: where the cache held them, they are read from its files only as
    far as they are used (the term counts read the words of the papers that changed).
    """

    rows: pl.LazyFrame  # the SQL's rows of every current paper
    digests: pl.DataFrame  # paper_id, digest of every current paper
    before: pl.LazyFrame  # the SQL's rows of every paper the cache held (none without one)
    before_digests: pl.DataFrame  # paper_id, digest of those papers


def over_papers(con: duckdb.DuckDBPyConnection, papers: pl.DataFrame, sql: str) -> pl.DataFrame:
    """The rows of `sql` where `papers` is the frame `papers`: a view of it in a schema
    searched first, which shadows the papers table of `con` for this query only."""
    con.execute("create or replace schema todo")
    con.register("todo_papers_frame", papers)
    try:
        con.execute("create view todo.papers as from todo_papers_frame")
        con.execute("set search_path = 'todo,main'")
        try:
            return con.execute(sql).pl()
        finally:
            con.execute("reset search_path")
    finally:
        con.execute("drop schema todo cascade")
        con.unregister("todo_papers_frame")


class PaperRows:
    """Rows that one SQL file derives from each paper alone (its abstract and links) and
    from fixed tables (a seed, the stop words), kept in the cache per paper: a run runs
    the SQL over the papers it has not seen only, so it costs what changed.

    One folder per SQL text, fixed tables and DuckDB version, of Parquet files that hold
    the SQL's rows of the current papers, and one row per paper read with the digest of
    the columns it was read from (sql/aggregate/paper_digests.sql), which also remembers
    the papers that gave no rows. A run that only adds papers writes their rows as a new
    part (`part-N`), beside what is there; one where papers left or changed text, or that
    finds PARTS_MAX parts, writes all current rows as one `whole-N`, which supersedes every
    file numbered below it. Each file is written atomically. Without a folder, `build`
    runs the SQL over all papers.
    """

    PARTS_MAX = 16

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        folder: Path | None,
        name: str,
        reads: tuple[str, ...],
        papers: pl.DataFrame,
    ):
        """Args:
        name: the SQL file, sql/<name>.sql; it reads `papers` and the tables `reads`.
        papers: the papers with their abstracts, which the SQL reads as `papers`; the
            papers table of `con` need not hold the abstracts (copying them into DuckDB
            took 0.45 s of each run at 104,000 papers).
        """
        self.digests = read_sql("aggregate/paper_digests")
        self.sql = read_sql(name)
        self.papers = papers
        self.macros, each_row = con.execute(
            "select getvariable('macros'), getvariable('macros_each_row')"
        ).fetchone()
        called = re.findall(r"macro (\w+)\(", self.macros or "")
        self.macros_each_row = each_row if any(f"{m}(" in self.sql for m in called) else None
        self.path: Path | None = None  # the folder of the files
        if folder is not None:
            key = hashlib.sha256(f"{duckdb.__version__}\n{self.digests}\n{self.sql}".encode())
            for table in reads:
                key.update(con.table(table).order("all").pl().write_csv().encode())
            # The macros the SQL may call (sql/macros), as `stage_vocabulary` defined them.
            key.update((self.macros or "").encode())
            self.stem = name.replace("/", "-")
            self.path = folder / f"{self.stem}-{key.hexdigest()[:16]}"

    def build(self, con: duckdb.DuckDBPyConnection, table: str, order: tuple[str, ...]) -> None:
        """Create `table` in `con`: the SQL's rows for all papers, sorted by `order`."""
        rows = self.update(con).rows.collect()
        con.register(f"{table}_frame", rows)
        sort = f" order by {', '.join(order)}" if order else ""
        con.execute(f"create or replace table {table} as from {table}_frame{sort}")
        con.unregister(f"{table}_frame")

    def update(self, con: duckdb.DuckDBPyConnection) -> PaperRowsUpdate:
        """The SQL's rows for all papers, read for new papers only, and the cache brought
        up to date; with the rows it held before."""
        digests = self.paper_digests(con)
        if self.path is None:
            rows = self.run_over(con, digests["paper_id"])
            return PaperRowsUpdate(rows.lazy(), digests, rows.clear().lazy(), digests.clear())
        files = self.files()
        stored = self.scan(files)
        read = stored.filter(pl.col("digest").is_not_null()).select("paper_id", "digest")
        read = read.collect()
        keep = digests.join(read, on=["paper_id", "digest"], how="semi")["paper_id"]
        todo = digests.filter(~pl.col("paper_id").is_in(keep.implode()))
        new = self.run_over(con, todo["paper_id"])
        before = pl.concat([new.clear().lazy(), stored.filter(pl.col("digest").is_null())],
                           how="diagonal_relaxed").select(new.columns)  # fmt: skip
        if keep.len() == read.height and len(files) < self.PARTS_MAX:
            # Every paper held is here, its text unchanged: the new rows are a part beside
            # the files read (which stay), and the rows held are read when used.
            rows = pl.concat([before, new.lazy()], how="diagonal_relaxed")
            if todo.height:
                self.save(pl.concat([new, todo], how="diagonal_relaxed"), whole=False)
        else:  # the files are replaced by a whole: what is used of them is read first
            held = before.collect()
            kept = held.filter(pl.col("paper_id").is_in(keep.implode()))
            current = pl.concat([kept, new], how="diagonal_relaxed")
            self.save(pl.concat([current, digests], how="diagonal_relaxed"), whole=True)
            before, rows = held.lazy(), current.lazy()
        return PaperRowsUpdate(rows, digests, before, read)

    def paper_digests(self, con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
        """sql/aggregate/paper_digests.sql over the papers; every per-paper SQL of a build
        reads the same digests, so they are kept in `con` (table paper_digests)."""
        try:
            return con.table("paper_digests").pl()
        except duckdb.CatalogException:
            # The columns sql/aggregate/paper_digests.sql reads: only they are converted.
            texts = self.papers.select("paper_id", "abstract", "links")
            digests = over_papers(con, texts, self.digests)
        con.register("paper_digests_frame", digests)
        con.execute("create table paper_digests as from paper_digests_frame")
        con.unregister("paper_digests_frame")
        return digests

    def run_over(self, con: duckdb.DuckDBPyConnection, papers: pl.Series) -> pl.DataFrame:
        """The SQL's rows for `papers` only."""
        # Picked from the frame: a join in DuckDB would read every column of every paper
        # (115,000 papers: 0.19 s, against 0.02 s).
        narrowed = self.papers.filter(pl.col("paper_id").is_in(papers.implode()))
        if self.macros_each_row is None or narrowed.height > MACRO_ROWS_MAX:
            return over_papers(con, narrowed, self.sql)
        con.execute(self.macros_each_row)
        try:
            return over_papers(con, narrowed, self.sql)
        finally:
            con.execute(self.macros)

    def files(self) -> list[tuple[int, Path]]:
        """The files that hold the current rows, by number: the latest whole and the parts
        after it, each checked against its seal. Where one fails, the folder is dropped
        (every paper's rows are computed again) and there are none."""
        if self.path is None or not self.path.is_dir():
            return []
        found = sorted(
            (int(f.stem.split("-")[1]), f)
            for f in self.path.glob("*.parquet")
            if f.stem.split("-")[0] in ("part", "whole") and f.stem.split("-")[1].isdigit()
        )
        wholes = [n for n, f in found if f.stem.startswith("whole-")]
        current = [(n, f) for n, f in found if n >= max(wholes, default=0)]
        try:
            for _, f in current:
                cache.verify(f)
        except cache.Damaged as damage:
            cache.dropped(damage, f"{self.stem}: every paper's rows computed again", self.path)
            return []
        return current

    def load(self) -> pl.DataFrame:
        """The rows the last builds left (the SQL's columns and digest), if any."""
        return self.scan(self.files()).collect()

    @staticmethod
    def scan(files: list[tuple[int, Path]]) -> pl.LazyFrame:
        """The rows of `files` (from `files()`, checked), to be read as far as used."""
        if files:
            return pl.concat([pl.scan_parquet(f) for _, f in files], how="diagonal_relaxed")
        return pl.LazyFrame(schema={"paper_id": pl.String, "digest": pl.String})

    def save(self, rows: pl.DataFrame, whole: bool) -> None:
        """Add `rows` as a part, or as the whole (also once PARTS_MAX parts are there);
        files it supersedes and files of other SQL texts or inputs go."""
        files = self.files()
        if not whole and len(files) >= self.PARTS_MAX:
            rows, whole = pl.concat([self.load(), rows], how="diagonal_relaxed"), True
        number = max((n for n, _ in files), default=0) + 1
        self.path.mkdir(parents=True, exist_ok=True)
        kind = "whole" if whole else "part"
        cache.write_parquet(self.path / f"{kind}-{number:06d}.parquet", rows, whole=False)
        if whole:
            for _, old in files:
                cache.drop(old)
        for stale in self.path.parent.glob(f"{self.stem}-*"):
            if stale != self.path:  # rows of another SQL text or input (or layout)
                cache.drop(stale)


class TermCounts:
    """Papers of each topic using each term (table term_counts, what topic_terms weighs),
    kept in the cache between runs with the vocabulary and the papers and topics they were
    counted from. A run reads the tokens of the papers that came, left, changed text or
    topic, or use a plural whose folding changed (`changed_tokens`), so it costs what
    changed; without earlier counts every paper counts as come.

    One Parquet file per SQL text and token cache, replaced atomically after each build,
    with three kinds of rows: a paper counted (paper_id, digest, topic_id), a word of the
    vocabulary (word, papers) and a count (topic_id, term, docs).
    """

    SQL = ("aggregate/word_papers", "aggregate/word_terms", "aggregate/term_counts")
    PAPERS = {"paper_id": pl.String, "digest": pl.String, "topic_id": pl.Int32}
    WORDS = {"word": pl.String, "papers": pl.Int64}
    COUNTS = {"topic_id": pl.Int32, "term": pl.String, "docs": pl.Int64}

    def __init__(self, folder: Path | None, tokens: PaperRows):
        """Args:
        tokens: the cache of sql/aggregate/paper_tokens.sql the counts are made from.
        """
        self.path: Path | None = None
        if folder is not None and tokens.path is not None:
            # Named as when the tokens were one file: counts made then are used still.
            tokens_name = tokens.path.with_suffix(".parquet").name
            key = hashlib.sha256(f"{duckdb.__version__}\n{tokens_name}".encode())
            for name in self.SQL:
                key.update(read_sql(name).encode())
            self.path = folder / f"term-counts-{key.hexdigest()[:16]}.parquet"

    def build(
        self, con: duckdb.DuckDBPyConnection, tokens: PaperRowsUpdate, topics: pl.DataFrame
    ) -> None:
        """Create term_counts in `con` for the papers in `topics` (paper_id, topic_id).

        Args:
            tokens: the rows of sql/aggregate/paper_tokens.sql now and before this run.
        """
        now = tokens.digests.join(topics, on="paper_id").select(list(self.PAPERS))
        now = now.cast(self.PAPERS)
        counted, words, counts = self.load(tokens.before_digests)
        for name, frame in (("word_papers_before", words), ("term_counts_before", counts)):
            con.register(name, frame)
        con.register("changed_tokens", changed_tokens(tokens, counted, now))
        for name in self.SQL[:2]:
            con.execute(f"create or replace table {name.split('/')[1]} as {read_sql(name)}")
        refolded = con.table("word_terms").filter("term_before <> term_after").pl()["word"]
        if len(refolded):
            con.register("changed_tokens", changed_tokens(tokens, counted, now, refolded))
        con.execute(f"create or replace table term_counts as {read_sql(self.SQL[2])}")
        self.save(now, con.table("word_papers").pl(), con.table("term_counts").pl())
        for name in ("word_papers_before", "term_counts_before", "changed_tokens"):
            con.unregister(name)
        con.execute("drop table word_papers")
        con.execute("drop table word_terms")

    def load(self, cached: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """The papers the last run counted, its vocabulary and its counts; none where there
        are none, or where the token cache no longer holds every counted paper's tokens.

        Args:
            cached: paper_id, digest of the papers whose tokens the token cache held.
        """
        empty = tuple(pl.DataFrame(schema=s) for s in (self.PAPERS, self.WORDS, self.COUNTS))
        if self.path is None:
            return empty
        state = cache.load(self.path, check_counts, "every paper's terms are counted again")
        if state is None:
            return empty
        counted = state.filter(pl.col("paper_id").is_not_null()).select(list(self.PAPERS))
        if counted.join(cached, on=["paper_id", "digest"], how="anti").height:
            return empty
        words = state.filter(pl.col("word").is_not_null()).select(list(self.WORDS))
        counts = state.filter(pl.col("term").is_not_null()).select(list(self.COUNTS))
        return counted, words, counts

    def save(self, counted: pl.DataFrame, words: pl.DataFrame, counts: pl.DataFrame) -> None:
        """Replace the file by these papers, vocabulary and counts; files of other SQL
        texts or token caches go."""
        if self.path is None:
            return
        state = pl.concat([counted, words, counts], how="diagonal_relaxed")
        cache.write_parquet(self.path, state)
        for stale in self.path.parent.glob("term-counts-*.parquet"):
            if stale != self.path:
                cache.drop(stale)


def check_counts(state: pl.DataFrame) -> str | None:
    """Why kept term counts cannot be trusted (a count below one, a count of no topic or
    term, a paper counted twice); None where they can."""
    columns = {**TermCounts.PAPERS, **TermCounts.WORDS, **TermCounts.COUNTS}
    if not set(columns) <= set(state.columns):
        return f"columns {state.columns}"
    counts = state.filter(pl.col("docs").is_not_null())
    if (counts["docs"] < 1).any() or counts.select(
        "topic_id", "term"
    ).null_count().sum_horizontal()[0]:
        return "counts that are no count of a topic's term"
    if (state.filter(pl.col("word").is_not_null())["papers"] < 1).any():
        return "words used by no paper"
    papers = state.filter(pl.col("paper_id").is_not_null())["paper_id"]
    if papers.n_unique() != papers.len():
        return "papers counted twice"
    return None


def changed_tokens(
    tokens: PaperRowsUpdate,
    counted: pl.DataFrame,
    now: pl.DataFrame,
    refolded: pl.Series | None = None,
) -> pl.DataFrame:
    """The tokens of the papers whose share of the term counts changes, with the `side`
    they count on: -1 taken back from the topic they were counted under (topic_before),
    +1 given to their topic now (topic_after), 0 both.

    A paper that came, left or changed text (digest) counts its tokens now on +1 and its
    tokens before on -1. One that moved to another topic gives its terms to it and takes
    them from the topic before: its tokens once, on side 0. One that uses one of the
    `refolded` words (whose plural folding changed) makes other terms now: its tokens on
    -1 and on +1, as if its text had changed.

    Args:
        counted, now: paper_id, digest, topic_id of the papers counted last and of now.
    """
    same_text = ["paper_id", "digest"]
    stayed = counted.join(now, on=same_text, suffix="_now")
    if refolded is not None:
        using = tokens.rows.filter(pl.col("word").is_in(refolded.implode()))
        using = using.select("paper_id").collect()["paper_id"]
        refolding = stayed.filter(pl.col("paper_id").is_in(using.implode()))
    else:
        refolding = stayed.clear()
    moved = stayed.filter(pl.col("topic_id") != pl.col("topic_id_now"))
    moved = moved.join(refolding, on="paper_id", how="anti")
    gone = pl.concat([counted.join(now, on=same_text, how="anti").select("paper_id", "topic_id"),
                      refolding.select("paper_id", "topic_id")])  # fmt: skip
    came = pl.concat([now.join(counted, on=same_text, how="anti").select("paper_id", "topic_id"),
                      refolding.select("paper_id", topic_id="topic_id_now")])  # fmt: skip
    null = pl.lit(None, pl.Int32)
    back = gone.select("paper_id", side=-1, topic_before="topic_id", topic_after=null)
    add = pl.concat([
        came.select("paper_id", side=1, topic_before=null, topic_after="topic_id"),
        moved.select("paper_id", side=0, topic_before="topic_id", topic_after="topic_id_now"),
    ])  # fmt: skip
    return pl.concat([with_topics(tokens.before, back), with_topics(tokens.rows, add)])


def with_topics(tokens: pl.LazyFrame, papers: pl.DataFrame) -> pl.DataFrame:
    """The tokens of `papers` (paper_id, side, topic_before, topic_after), with the
    paper's side and topics."""
    picked = tokens.filter(pl.col("paper_id").is_in(papers["paper_id"].implode()))
    sides = papers.cast({"side": pl.Int32, "topic_before": pl.Int32, "topic_after": pl.Int32})
    return (
        picked.join(sides.lazy(), on="paper_id")
        .select("side", "topic_before", "topic_after", "paper_id", "word", "position")
        .collect()
    )


def count_topic_terms(
    con: duckdb.DuckDBPyConnection, cache: Path | None, topics: pl.DataFrame, papers: pl.DataFrame
) -> None:
    """Create term_counts in `con` (which holds stopwords): papers of each topic in `topics`
    (paper_id, topic_id) using each term of their abstracts (in `papers`), from the tokens
    and counts kept in `cache` where there are some (`PaperRows`, `TermCounts`)."""
    tokens = PaperRows(con, cache, "aggregate/paper_tokens", ("stopwords",), papers)
    TermCounts(cache, tokens).build(con, tokens.update(con), topics)


LIST_FRAMES = ("neighbor_candidates", "similar_pairs", "pair_groups")


def reading_lists() -> set[str]:
    """The tables of sql/ that read the neighbour lists (LIST_FRAMES), or a table that
    does, so are built after the search: any whose SQL names one of them."""
    late = set(LIST_FRAMES)
    for table in SQL_TABLES:  # in dependency order
        text = read_sql(table)
        if any(re.search(rf"\b{name}\b", text) for name in late):
            late.add(table)
    return late - set(LIST_FRAMES)


def build_table(
    con: duckdb.DuckDBPyConnection, table: str, cache: Path | None, papers: pl.DataFrame
) -> int:
    """Create `table` in `con` from sql/<table>.sql (per paper where it is kept so,
    `PaperRows`); its row count."""
    if table in PER_PAPER_TABLES:
        rows = PaperRows(con, cache, table, PER_PAPER_TABLES[table], papers)
        rows.build(con, table, tables.table(table).keys)
    else:
        con.execute(f"create or replace table {table} as {read_sql(table)}")
    return con.execute(f"select count(*) from {table}").fetchone()[0]


def build_aggregates(
    con: duckdb.DuckDBPyConnection,
    papers: pl.DataFrame,
    embeddings: pl.DataFrame,
    k: int,
    threshold: float,
    n_topics: int | None,
    seed: int,
    previous_topics: dict[int, np.ndarray] | None = None,
    previous_papers: pl.Series | None = None,
    previous_assignments: pl.DataFrame | None = None,
    neighbors_method: str = "auto",
    exact_neighbors_max: int = 20_000,
    search: Callable[[list[str], np.ndarray], pl.DataFrame] | None = None,
    duplicate_group_max: int = 50,
    refit_topics: bool = False,
    say: Callable[[str], object] | None = None,
    previous_coordinates: pl.DataFrame | None = None,
    cache: Path | None = None,
) -> dict[str, int]:
    """Build the derived tables in `con` (which already holds papers, sources, paper_sources).

    `papers` is the papers with their abstracts: the SQL that reads abstracts reads them
    there, so the papers table of `con` may leave them out.

    Args:
        previous_topics: topic id -> centroid of the previous version, to keep ids stable.
        previous_papers: the papers of the previous version (new topics form among others).
        previous_assignments: each of those papers' topic (paper_id, topic_id), kept.
        neighbors_method: auto, exact or hnsw (see `nearest`).
        search: finds each paper's candidate lists (`candidates`) of (ids, vectors) another
            way: on a cluster's workers, or by updating the last run's lists; without it,
            `candidates` searches here.
        duplicate_group_max: the largest near-duplicate group whose pairs are listed in
            duplicates; larger groups are in duplicate_groups only.
        refit_topics: fit topics afresh instead of carrying the previous ones over.
        say: where to tell what was done with the topics and the map (the run's log).
        previous_coordinates: each paper's map place in the previous version (paper_id,
            x, y), kept.
        cache: a folder where the rows derived from each paper alone (mentions, the words
            of topic terms) are kept between runs (`PaperRows`), so that only new papers
            are read, and the counts of topic terms (`TermCounts`), so that only papers
            that changed are counted; without it, every paper is read each time.

    Returns:
        row count per table built.
    """
    ids = papers["paper_id"].sort().to_list()
    vectors = vectors_of(embeddings, pl.Series(ids, dtype=pl.String))

    def neighbour_lists() -> tuple[pl.DataFrame, dict[str, pl.DataFrame]]:
        if search is None:
            found = candidates(ids, vectors, max(k, PAIR_CAP), threshold, neighbors_method,
                               exact_neighbors_max)  # fmt: skip
        else:
            found = search(ids, vectors)
        top, pairs = split_candidates(found, k, threshold)
        frames = {"neighbor_candidates": top, "similar_pairs": pairs}
        return found, frames | {"pair_groups": group_pairs(pairs)}

    # The lists are searched (numpy, most of it outside the GIL) in a thread while the
    # topics and the tables that do not read the lists are built (DuckDB): each side
    # keeps about one and a half of 2 cores busy alone.
    with ThreadPoolExecutor(1, thread_name_prefix="paperlake-neighbours") as pool:
        searching = pool.submit(contextvars.copy_context().run, neighbour_lists)
        assignments, centroids, topic_note = cluster_topics(
            ids, vectors, n_topics, seed, previous_topics, refit_topics, previous_papers,
            previous_assignments,
        )  # fmt: skip
        stage_frames(con, {"paper_topics": assignments, "topic_centroids": centroids,
                           "stopwords": stopwords()})  # fmt: skip
        con.execute(f"set variable neighbors_k = {int(k)}")
        con.execute(f"set variable duplicate_threshold = {float(threshold)}")
        con.execute(f"set variable duplicate_group_max = {int(duplicate_group_max)}")
        con.execute(f"set variable topic_terms = {TOPIC_TERMS}")
        stage_vocabulary(con)
        count_topic_terms(con, cache, assignments, papers)
        late = reading_lists()
        counts = {"paper_topics": assignments.height}
        for table in (t for t in SQL_TABLES if t not in late):
            counts[table] = build_table(con, table, cache, papers)
        found, lists = searching.result()
    coordinates, map_note = projection.paper_coordinates(
        ids, vectors, seed, previous_coordinates, found
    )
    if say:
        say(f"topics: {topic_note}")
        say(f"map: {map_note}")
    stage_frames(con, lists | {"paper_coordinates": coordinates})
    counts["paper_coordinates"] = coordinates.height
    for table in (t for t in SQL_TABLES if t in late):
        counts[table] = build_table(con, table, cache, papers)
    for scratch in (
        "neighbor_candidates", "similar_pairs", "pair_groups", "topic_centroids", "stopwords",
        "mention_vocabulary", "term_counts", "paper_digests",
    ):  # fmt: skip
        con.execute(f"drop table {scratch}")
    return counts
