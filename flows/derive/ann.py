"""Approximate neighbour indexes (FAISS): the HNSW graph a search builds for itself, and the
IVF index kept per model between runs (`PaperIndex`, `IndexStore`), updated for the papers
added and removed, so that a run above exact_neighbors_max searches only what changed."""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl

from flows.core import cache
from flows.core.run_record import run_logger

HNSW_LINKS = 32  # graph degree: recall 0.998 at 10,000 bench abstracts (make bench-scaling)
HNSW_BUILD_BREADTH = 40
HNSW_SEARCH_BREADTH = 128

# IVF: k-means lists of papers; a search scans the papers of the lists nearest the query.
# Lists = IVF_LISTS_PER_ROOT x sqrt(papers), and IVF_PROBES of them scanned a query: the
# recall and seconds of bench/ann_recall.py (docs in its header).
IVF_LISTS_PER_ROOT = 2
IVF_PROBES = 160
# k-means on at most this many papers a list (FAISS asks for 39 at least), from IVF_SEED.
IVF_TRAIN_PER_LIST = 64
IVF_SEED = 1234
IVF_TRAIN_ROUNDS = 20
# An index whose lists are more than this factor from the count its papers call for
# (the warehouse grew or shrank that much since it was trained) is trained again.
IVF_RESIZE = 2.0
REDO = "its papers are filed again in a new index"


def build_graph(vectors: np.ndarray):
    """A FAISS HNSW graph of `vectors` (inner product), built on one thread."""
    import faiss

    index = faiss.IndexHNSWFlat(vectors.shape[1], HNSW_LINKS, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = HNSW_BUILD_BREADTH
    with one_thread():
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


@contextmanager
def one_thread():
    """FAISS on one thread within, as many as before after: a graph's inserts on one
    thread are made in one order, so the same papers make the same graph."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def set_breadth(index, fetch: int) -> None:
    """How widely `index` (an HNSW graph or an IVF index) searches for `fetch` results."""
    if hasattr(index, "hnsw"):
        index.hnsw.efSearch = max(HNSW_SEARCH_BREADTH, fetch)
    else:
        index.nprobe = min(IVF_PROBES, index.nlist)


def list_count(n: int) -> int:
    """The IVF lists for `n` papers: IVF_LISTS_PER_ROOT x sqrt(n), and at least 39 papers a
    list to train them on."""
    return max(1, min(round(IVF_LISTS_PER_ROOT * n**0.5), n // 39))


@dataclass
class PaperIndex:
    """An IVF index of papers: its k-means centroids and the list each paper is filed in.

    The papers' vectors are not kept with it: the embeddings cache holds them, and a run
    has them in memory, so `searchable` files them again in a moment (their lists are not
    computed again), and the index kept in the cache is a few bytes a paper.
    """

    centroids: np.ndarray  # lists x dim, float32
    papers: pl.DataFrame  # paper_id, list (Int32)


def train(ids: list[str], vectors: np.ndarray, seed: int = IVF_SEED) -> PaperIndex:
    """A new index of `ids`: spherical k-means on a sample of their vectors (seeded), each
    paper filed in the list of its nearest centroid."""
    import faiss

    n, dim = vectors.shape
    lists = list_count(n)
    if lists == 1:  # every paper in one list (too few for k-means): any unit centroid
        centroids = np.eye(1, dim, dtype=np.float32)
        return PaperIndex(centroids, filed(ids, np.zeros(n, dtype=np.int32)))
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(n, min(n, IVF_TRAIN_PER_LIST * lists), replace=False))
    kmeans = faiss.Kmeans(dim, lists, niter=IVF_TRAIN_ROUNDS, seed=seed, spherical=True)
    kmeans.train(np.ascontiguousarray(vectors[sample], dtype=np.float32))
    centroids = np.ascontiguousarray(kmeans.centroids, dtype=np.float32)
    return PaperIndex(centroids, filed(ids, assign(centroids, vectors)))


def filed(ids: list[str] | pl.Series, lists: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame(
        {"paper_id": pl.Series(ids, dtype=pl.String), "list": pl.Series(lists, dtype=pl.Int32)}
    )


def assign(centroids: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """The list of each vector: its nearest centroid (highest inner product)."""
    import faiss

    if not len(vectors):
        return np.zeros(0, dtype=np.int32)
    flat = faiss.IndexFlatIP(centroids.shape[1])
    flat.add(centroids)
    _, nearest = flat.search(np.ascontiguousarray(vectors, dtype=np.float32), 1)
    return nearest[:, 0].astype(np.int32)


def updated(index: PaperIndex, ids: list[str], vectors: np.ndarray) -> tuple[PaperIndex, int, int]:
    """`index` for the papers `ids` (rows of `vectors`): the papers gone removed, the new
    ones filed; with the counts added and removed."""
    current = pl.DataFrame({"paper_id": pl.Series(ids, dtype=pl.String)}).with_row_index("row")
    kept = index.papers.join(current, on="paper_id", how="semi")
    new = current.join(index.papers, on="paper_id", how="anti", maintain_order="left")
    lists = assign(index.centroids, vectors[new["row"].to_numpy()])
    papers = pl.concat([kept, filed(new["paper_id"], lists)])
    return PaperIndex(index.centroids, papers), new.height, index.papers.height - kept.height


def searchable(index: PaperIndex, ids: list[str], vectors: np.ndarray):
    """A FAISS IVF index (inner product) of `vectors`, ids their row numbers, each filed in
    its paper's list: every paper of `ids` must be in `index`."""
    import faiss
    from faiss.contrib.ivf_tools import add_preassigned

    n, dim = vectors.shape
    position = pl.DataFrame({"paper_id": pl.Series(ids, dtype=pl.String)}).with_row_index("row")
    rows = position.join(index.papers, on="paper_id", how="left")
    if rows["list"].null_count():
        raise ValueError(f"{rows['list'].null_count()} papers are not in the index")
    lists = np.empty(n, dtype=np.int64)
    lists[rows["row"].to_numpy()] = rows["list"].to_numpy()
    quantizer = faiss.IndexFlatIP(dim)
    quantizer.add(index.centroids)
    ivf = faiss.IndexIVFFlat(quantizer, dim, len(index.centroids), faiss.METRIC_INNER_PRODUCT)
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    # Held here while FAISS reads them: add_preassigned keeps only a pointer to the ids.
    rows_ids = np.arange(n, dtype=np.int64)
    add_preassigned(ivf, matrix, lists, rows_ids)
    return ivf


def fresh_index(ids: list[str], vectors: np.ndarray):
    """A searchable IVF index of `vectors`, trained for them alone (kept nowhere)."""
    return searchable(train(ids, vectors), ids, vectors)


class IndexStore:
    """Where a model's `PaperIndex` is kept in the cache: two sealed Parquet files (each
    paper's list; the centroids), named by the model (id, weights, precision)."""

    def __init__(self, folder: Path, model_key: str):
        name = hashlib.sha256(f"{model_key}:ivf".encode()).hexdigest()[:16]
        self.papers_path = folder / f"index-{name}.parquet"
        self.centroids_path = folder / f"index-{name}.centroids.parquet"

    def load(self, dim: int) -> PaperIndex | None:
        """The index a run left for vectors of `dim` dimensions, if it passes its checks:
        else it is dropped (one warning) and None returned."""
        both = (self.papers_path, self.centroids_path)
        stored = cache.load(self.centroids_path, check_centroids, REDO, *both)
        if stored is None:
            cache.drop(self.papers_path)  # without its centroids, its lists mean nothing
            return None
        centroids = stored["centroid"].to_numpy().astype(np.float32)
        if centroids.shape[1] != dim:
            reason = f"centroids of {centroids.shape[1]} dimensions for vectors of {dim}"
            cache.dropped(cache.Damaged(self.centroids_path, reason), REDO, *both)
            return None
        check = partial(check_papers, lists=len(centroids))
        papers = cache.load(self.papers_path, check, REDO, *both)
        return None if papers is None else PaperIndex(np.ascontiguousarray(centroids), papers)

    def save(self, index: PaperIndex, trained: bool) -> None:
        """Keep `index`; its centroids are written only where it was `trained` anew."""
        if trained or not self.centroids_path.exists():
            dim = index.centroids.shape[1]
            rows = pl.Series("centroid", index.centroids, dtype=pl.Array(pl.Float32, dim))
            cache.write_parquet(self.centroids_path, pl.DataFrame([rows]))
        cache.write_parquet(self.papers_path, index.papers)

    def drop(self) -> None:
        cache.drop(self.papers_path)
        cache.drop(self.centroids_path)


def check_centroids(stored: pl.DataFrame) -> str | None:
    """Why kept centroids cannot be trusted (not a row of finite unit vectors); None where
    they can."""
    if stored.columns != ["centroid"] or not isinstance(stored.schema["centroid"], pl.Array):
        return f"columns {stored.columns}"
    if stored.height == 0:
        return "no centroids"
    matrix = stored["centroid"].to_numpy()
    if not np.isfinite(matrix).all():
        return "centroids that are not finite"
    return None


def check_papers(papers: pl.DataFrame, lists: int) -> str | None:
    """Why kept lists of papers cannot be trusted: a paper twice or without an id, a list
    the index has not; None where they can."""
    if papers.schema != pl.Schema({"paper_id": pl.String, "list": pl.Int32}):
        return f"columns {papers.columns}"
    if papers["paper_id"].null_count() or papers["list"].null_count():
        return "rows without a paper or a list"
    if papers["paper_id"].n_unique() != papers.height:
        return "papers filed twice"
    if papers.height and not (papers["list"].min() >= 0 and papers["list"].max() < lists):
        return f"lists outside the index's {lists}"
    return None


def kept_index(store: IndexStore, ids: list[str], vectors: np.ndarray):
    """A searchable IVF index of `vectors` (`searchable`): the one kept in `store`, updated
    for the papers added and removed since, or a new one where none is kept, it is damaged,
    or the warehouse grew or shrank past IVF_RESIZE since it was trained; kept again."""
    say = run_logger().info
    index = store.load(vectors.shape[1])
    trained = index is None or not sized_for(len(index.centroids), len(ids))
    if trained:
        index = train(ids, vectors)
        say("neighbours: a new index of %d lists for %d papers", len(index.centroids), len(ids))
    else:
        index, added, removed = updated(index, ids, vectors)
        say("neighbours: the kept index updated (%d papers added, %d removed)", added, removed)
    store.save(index, trained)
    return searchable(index, ids, vectors)


def sized_for(lists: int, n: int) -> bool:
    """Whether an index of `lists` lists still suits `n` papers (within IVF_RESIZE)."""
    target = list_count(n)
    return target / IVF_RESIZE <= lists <= target * IVF_RESIZE
