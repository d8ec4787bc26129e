"""Each paper's nearest papers: exact (blockwise products) or through an index (an HNSW
graph, an IVF index: flows/derive/ann.py), the candidate lists top-k neighbours and
near-duplicate pairs are read from, and the search split into row ranges for a cluster's
workers."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
from threadpoolctl import threadpool_limits

from flows.core.progress import progress
from flows.core.settings import NEIGHBOR_METHODS
from flows.derive import ann, kept_graph
from flows.embed import compute_threads

# Rows whose products with every paper are made at a time: `top_k` passes over a block
# several times, and a block that fits the caches is passed over faster (bench/).
BLOCK_ROWS = 512
TOP_K_ROWS = 128
# `top_k` ranks at most this many times k candidates a row before it partitions instead.
TOP_K_SURVIVORS = 16


def vectors_of(embeddings: pl.DataFrame, ids: pl.Series) -> np.ndarray:
    """The embedding matrix (float32, rows in the order of `ids`, read-only).

    Where the embeddings hold `ids` in that order (as the embed stage leaves them) the
    matrix is a view of their values, not a copy: at a million papers a gather and a cast
    cost 12 s and 4.5 GB.
    """
    column = embeddings["embedding"]
    if not embeddings["paper_id"].equals(ids, check_names=False):
        order = pl.DataFrame({"paper_id": ids}).join(
            embeddings.select("paper_id", "embedding"), on="paper_id", how="left",
            maintain_order="left",
        )  # fmt: skip
        column = order["embedding"]
    if column.null_count():
        raise ValueError("some papers have no embedding")
    if column.len() == 0:
        return np.zeros((0, 0), dtype=np.float32)
    lengths = column.list.len()
    if lengths.min() != lengths.max() or not lengths.min():
        raise ValueError("embeddings of different lengths")
    flat = column.explode().cast(pl.Float32)
    return flat.to_numpy().reshape(len(column), int(lengths[0]))


# Most near-duplicate pairs kept per paper (its closest): a corpus of many copies then
# costs memory linear in its size; duplicate_groups still holds every copy.
PAIR_CAP = 32


def neighbor_method(method: str, n: int, exact_max: int) -> str:
    """exact, hnsw or ivf: `auto` takes exact up to `exact_max` papers, where it is also
    faster, and above it the HNSW graph that later runs update (flows/derive/kept_graph.py)."""
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
    index = approximate_index(neighbor_method(method, n, exact_max), ids, vectors)
    if index is None:
        found = exact_rows(vectors, np.arange(n), width)
    else:
        found = index_rows(index, vectors, np.arange(n), width, threshold)
    return id_frame(ids, *found)


def approximate_index(method: str, ids: list[str], vectors: np.ndarray):
    """A FAISS index to search `vectors` with (row numbers as ids): an HNSW graph, or an IVF
    index trained for them; None for exact search."""
    if method == "hnsw":
        return ann.build_graph(vectors)
    return ann.fresh_index(ids, vectors) if method == "ivf" else None


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
    if runs is not None:  # ranks counted along the runs: quicker than over groups
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
    with blas_threads(), progress("neighbours", len(rows), "papers") as advance:
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
            advance(len(here))
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
    ranked, which is quicker than partitioning every row. Rows where too many scores tie
    at the top (copies of one paper) are partitioned.
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
    same, but the flat scan is several times quicker on wide blocks."""
    return np.divmod(np.flatnonzero(mask), mask.shape[1])


def top_k_by_partition(block: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """`top_k` by partitioning each row, TOP_K_ROWS rows at a time: piece by piece, the
    index arrays stay in the CPU's cache."""
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
    return threadpool_limits(compute_threads(), user_api="blas")


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
    index=None,
) -> Triples:
    """The rows of `candidates`, the search split into ranges of query rows that `fan` runs
    elsewhere.

    The matrix (and for hnsw and ivf the index: `index` where given, else one built here)
    is written once to `workdir` for the workers to read; `fan` maps the row ranges, the
    matrix file and the index file (None for exact search) to each range's triples,
    through `search_rows`.
    """
    if not len(ids):
        return concat_triples([])
    workdir.mkdir(parents=True, exist_ok=True)
    matrix = workdir / f"vectors-{os.getpid()}.npy"
    graph = None
    np.save(matrix, np.ascontiguousarray(vectors, dtype=np.float32))
    try:
        if index is None:
            index = approximate_index(neighbor_method(method, len(ids), exact_max), ids, vectors)
        if index is not None:
            graph = workdir / f"index-{os.getpid()}.faiss"
            kept_graph.write_searchable(index, graph)
        parts = fan(row_blocks(len(ids), pieces), matrix, graph)
    finally:
        matrix.unlink(missing_ok=True)
        if graph:
            graph.unlink(missing_ok=True)
            kept_graph.rows_path(graph).unlink(missing_ok=True)
    return concat_triples(parts)


def search_rows(
    rows: tuple[int, int], matrix: Path, graph: Path | None, width: int, threshold: float
) -> Triples:
    """One range of query rows of `nearest_in_pieces`, from its files (on a worker)."""
    vectors = np.load(matrix)
    if graph is None:
        return exact_rows(vectors, np.arange(*rows), width)
    index = kept_graph.read_searchable(graph)
    return index_rows(index, vectors, np.arange(*rows), width, threshold)


def index_search(index, matrix: np.ndarray, rows: np.ndarray, fetch: int):
    """The `fetch` nearest other papers a FAISS index (HNSW or IVF, row numbers as ids)
    finds for the papers at `rows`: columns and scores (`pair_scores`), rows x fetch, best
    first (ties by column); -1 and -inf where it found fewer."""
    import faiss

    faiss.omp_set_num_threads(compute_threads())
    ann.set_breadth(index, fetch + 1)
    _, cols = index.search(matrix[rows], min(len(matrix), fetch + 1))  # + 1: itself
    cols = cols.astype(np.int64)
    valid = (cols >= 0) & (cols != rows[:, None])
    at, slot = np.nonzero(valid)
    scores = np.full(cols.shape, -np.inf, dtype=np.float32)
    scores[at, slot] = pair_scores(matrix, rows[at], cols[at, slot])
    cols[~valid] = -1
    order = np.lexsort((cols, -scores), axis=-1)[:, :fetch]
    return np.take_along_axis(cols, order, 1), np.take_along_axis(scores, order, 1)


def index_rows(index, vectors: np.ndarray, rows: np.ndarray, width: int, threshold: float):
    """Index search for the papers at `rows`: their `width` nearest (Triples).

    A paper whose found neighbours all lie above `threshold` may have closer ones the
    index missed (a crowd of copies): its row is searched exactly.
    """
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    rows = np.asarray(rows, dtype=np.int64)
    cols, scores = index_search(index, matrix, rows, width)
    return listed_rows(matrix, rows, cols, scores, width, threshold)


def listed_rows(
    matrix: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    scores: np.ndarray,
    width: int,
    threshold: float,
) -> Triples:
    """The lists of the papers at `rows` from what an index found (`index_search`): each
    its first `width`; crowded rows (every one found at `threshold` or more) exactly."""
    cols, scores = cols[:, :width], scores[:, :width]
    keep = cols >= 0
    full = min(width, len(matrix) - 1)
    crowded = (keep & (scores >= threshold)).sum(axis=1) >= full
    keep &= ~crowded[:, None]
    at = np.broadcast_to(rows[:, None], cols.shape)
    listed = (at[keep], cols[keep], scores[keep])
    return concat_triples([listed, exact_rows(matrix, rows[crowded], width)])


def concat_triples(parts: list[Triples]) -> Triples:
    """One (rows, columns, scores) of several, in their order."""
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
