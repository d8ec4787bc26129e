"""The HNSW graph kept per model between runs (`GraphStore`, `kept_graph`): the papers a run
adds are inserted into it, the papers gone are left out of every search, and a run
searches only what changed. A search through it costs about log(papers), where the kept
IVF index (flows/derive/ann.py) scans a share of every paper that shrinks only as
sqrt(papers): at a million papers, 10,000 new papers are searched in 2.5 s instead of
7.3 (bench/ann_recall.py, docs/scale.md)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from flows.core import cache
from flows.core.files import write_atomically
from flows.core.run_record import run_logger
from flows.derive import ann

# A graph where more than this share of its papers are gone is built again: a search
# still walks through them, it only lists none.
GRAPH_STALE = 0.25
REDO = "its papers are inserted again in a new graph"


@dataclass
class KeptGraph:
    """An HNSW graph (inner product) of papers and the paper of each of its slots (in the
    order they were inserted); a search names the rows of `ids` the run has, and leaves
    out the slots of papers gone.

    Where every slot is the row of the same number (a graph built for `ids` alone), the
    FAISS index itself is searched (`searchable`): a cluster's workers read it from a file.
    """

    graph: object  # faiss.IndexHNSWFlat
    slots: pl.Series  # paper_id of each slot
    rows: np.ndarray | None = None  # each slot's row in the run's ids, -1 for papers gone

    @property
    def hnsw(self):
        return self.graph.hnsw  # ann.set_breadth sets its breadth of search

    def search(self, queries: np.ndarray, k: int):
        """FAISS's search: scores and rows of the `k` nearest papers of the run (-1 where
        fewer were found)."""
        import faiss

        params = faiss.SearchParametersHNSW()
        params.efSearch = self.graph.hnsw.efSearch
        gone = np.flatnonzero(self.rows < 0).astype(np.int64)
        if len(gone):
            batch = faiss.IDSelectorBatch(len(gone), faiss.swig_ptr(gone))
            keep = faiss.IDSelectorNot(batch)
            params.sel = keep
        scores, slots = self.graph.search(queries, k, params=params)
        return scores, np.where(slots >= 0, self.rows[np.maximum(slots, 0)], -1)


def write_searchable(index, path: Path) -> None:
    """Write a searchable index (a FAISS index, or a `KeptGraph`: its graph, and each slot's
    row beside it) for a cluster's workers to read (`read_searchable`)."""
    import faiss

    graph = index.graph if isinstance(index, KeptGraph) else index
    faiss.write_index(graph, str(path))
    if isinstance(index, KeptGraph):
        np.save(rows_path(path), index.rows)


def read_searchable(path: Path):
    """What `write_searchable` wrote to `path`."""
    import faiss

    graph = faiss.read_index(str(path))
    if not rows_path(path).exists():
        return graph
    return KeptGraph(graph, pl.Series("paper_id", [], pl.String), np.load(rows_path(path)))


def rows_path(path: Path) -> Path:
    return path.with_name(path.name + ".rows.npy")


def built(ids: list[str] | pl.Series, vectors: np.ndarray) -> KeptGraph:
    """A new graph of `vectors`, slot i the paper ids[i] (`ann.build_graph`: one thread,
    so that the same papers make the same graph)."""
    slots = pl.Series("paper_id", ids, dtype=pl.String)
    return KeptGraph(ann.build_graph(vectors), slots, np.arange(len(slots), dtype=np.int64))


def searchable(kept: KeptGraph):
    """The FAISS graph where its slots are the run's rows, else `kept` itself."""
    return kept.graph if np.array_equal(kept.rows, np.arange(len(kept.rows))) else kept


def slot_rows(slots: pl.Series, ids: list[str]) -> np.ndarray:
    """Each slot's row in `ids`, -1 for a paper gone."""
    current = pl.DataFrame({"paper_id": pl.Series(ids, dtype=pl.String)}).with_row_index("row")
    rows = pl.DataFrame({"paper_id": slots}).join(
        current, on="paper_id", how="left", maintain_order="left"
    )["row"]
    return rows.fill_null(-1).to_numpy().astype(np.int64)


def placed(
    kept: KeptGraph, ids: list[str], vectors: np.ndarray, rows: np.ndarray | None = None
) -> tuple[KeptGraph, int, int]:
    """`kept` for the papers `ids` (rows of `vectors`): the new ones inserted (one thread,
    in the order of `ids`), each slot given its row (-1 for papers gone); with the counts
    added and gone. `rows`: the slots' rows (`slot_rows`), where already known."""
    rows = slot_rows(kept.slots, ids) if rows is None else rows
    is_new = np.ones(len(ids), bool)
    is_new[rows[rows >= 0]] = False
    new = np.flatnonzero(is_new)
    if len(new):
        with ann.one_thread():
            kept.graph.add(np.ascontiguousarray(vectors[new], dtype=np.float32))
        added = pl.Series("paper_id", ids, dtype=pl.String).gather(new)
        kept.slots = pl.concat([kept.slots, added])
    kept.rows = np.concatenate([rows, new])
    return kept, len(new), int((rows < 0).sum())


class GraphStore:
    """Where a model's graph is kept in the cache: the FAISS file, sealed as the cache's
    Parquet files are (flows/core/cache.py), and the paper of each slot (sealed Parquet),
    named by the model (id, weights, precision)."""

    def __init__(self, folder: Path, model_key: str):
        name = hashlib.sha256(f"{model_key}:hnsw".encode()).hexdigest()[:16]
        self.graph_path = folder / f"graph-{name}.faiss"
        self.slots_path = folder / f"graph-{name}.parquet"

    def load(self, dim: int) -> KeptGraph | None:
        """The graph a run left for vectors of `dim` dimensions, if it passes its checks:
        else it is dropped (one warning) and None returned."""
        import faiss

        both = (self.graph_path, self.slots_path)
        slots = cache.load(self.slots_path, check_slots, REDO, *both)
        if slots is None:
            cache.drop(self.graph_path)  # without its slots, its papers are unnamed
            return None
        try:
            cache.verify(self.graph_path)
            graph = faiss.read_index(str(self.graph_path))
        except FileNotFoundError:
            return None
        except cache.Damaged as damage:
            cache.dropped(damage, REDO, *both)
            return None
        except RuntimeError as exc:  # FAISS cannot read it
            cache.dropped(cache.Damaged(self.graph_path, f"unreadable: {exc}"), REDO, *both)
            return None
        if (reason := graph_mismatch(graph, dim, slots.height)) is not None:
            cache.dropped(cache.Damaged(self.graph_path, reason), REDO, *both)
            return None
        return KeptGraph(graph, slots["paper_id"])

    def save(self, kept: KeptGraph) -> None:
        """Keep the graph, then its slots. The slots kept before are dropped first: a graph
        is never paired with another graph's slots (a run stopped between the two writes
        leaves a graph without slots, which the next run builds again)."""
        import faiss

        cache.drop(self.slots_path)
        write_atomically(self.graph_path, lambda tmp: faiss.write_index(kept.graph, str(tmp)))
        cache.seal(self.graph_path, kept.graph.ntotal)
        cache.write_parquet(self.slots_path, pl.DataFrame({"paper_id": kept.slots}))

    def drop(self) -> None:
        cache.drop(self.graph_path)
        cache.drop(self.slots_path)


def check_slots(slots: pl.DataFrame) -> str | None:
    """Why kept slots cannot be trusted (not one paper id a slot, each once); None where
    they can."""
    if slots.schema != pl.Schema({"paper_id": pl.String}):
        return f"columns {slots.columns}"
    if slots["paper_id"].null_count():
        return "slots without a paper"
    if slots["paper_id"].n_unique() != slots.height:
        return "papers in two slots"
    return None


def graph_mismatch(graph, dim: int, slots: int) -> str | None:
    """Why a graph read from the cache does not fit: not an HNSW graph, vectors of other
    dimensions, a size other than its slots'; None where it fits."""
    if not hasattr(graph, "hnsw"):
        return f"a {type(graph).__name__}, not an HNSW graph"
    if graph.d != dim:
        return f"vectors of {graph.d} dimensions where the run's have {dim}"
    if graph.ntotal != slots:
        return f"{graph.ntotal} papers where its slots name {slots}"
    return None


def kept_graph(store: GraphStore, ids: list[str], vectors: np.ndarray):
    """A graph of `vectors` to search (`searchable`): the one kept in `store`, the papers
    added since inserted, or a new one where none is kept, it is damaged, or more than
    GRAPH_STALE of its papers are gone; kept again where it changed."""
    say = run_logger().info
    kept, added = store.load(vectors.shape[1]), 0
    if kept is not None:
        rows = slot_rows(kept.slots, ids)
        gone = int((rows < 0).sum())
        if gone > GRAPH_STALE * len(kept.slots):  # seen before any paper is inserted
            say("neighbours: %d of the kept graph's %d papers are gone", gone, len(kept.slots))
            kept = None
        else:
            kept, added, gone = placed(kept, ids, vectors, rows)
            say("neighbours: the kept graph updated (%d papers added, %d gone)", added, gone)
    if kept is None:
        kept, added = built(ids, vectors), len(ids)
        say("neighbours: a new graph of %d papers", len(ids))
    if added:
        store.save(kept)
    return searchable(kept)
