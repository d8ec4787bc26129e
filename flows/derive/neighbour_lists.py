"""Each paper's neighbour lists kept between runs, so that a run updates them (sealed and
checked when read: flows/core/cache.py) instead of searching every paper again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from flows.core.cluster import cluster_workers, fan_out
from flows.core.run_record import run_logger
from flows.core.settings import Settings
from flows.derive.ann import IndexStore, kept_index
from flows.derive.kept_graph import GraphStore, kept_graph
from flows.derive.kept_lists import Lists, NeighbourLists, list_runs, trimmed
from flows.derive.neighbours import (
    PAIR_CAP,
    TOP_K_ROWS,
    Triples,
    approximate_index,
    concat_triples,
    exact_rows,
    index_rows,
    index_search,
    listed_rows,
    nearest_in_pieces,
    neighbor_method,
    pair_scores,
    positions,
)

# How much further than its own list a new paper's nearest are looked through for the old
# papers whose lists it enters (`indexed_update`): bench/ann_recall.py.
REVERSE_WIDTH = 2


def update_candidates(
    ids: list[str],
    vectors: np.ndarray,
    width: int,
    previous: pl.DataFrame,
    previous_ids: list[str],
    k: int,
    threshold: float,
    index=None,
) -> pl.DataFrame:
    """`update_lists` of lists by id (paper_id, neighbor_id, score) of `previous_ids`."""
    kept = Lists.of(sorted(previous_ids), previous)
    return update_lists(ids, vectors, width, kept, k, threshold, index).frame()


def update_lists(
    ids: list[str],
    vectors: np.ndarray,
    width: int,
    previous: Lists,
    k: int,
    threshold: float,
    index=None,
) -> Lists:
    """`candidates` as `trim_lists` keeps them, from the lists of a previous set of papers:
    work grows with the papers added or removed times all papers (exact), or with the
    papers added or removed alone (through `index`), never with all papers squared.

    New papers are searched; an old paper's list gains the new papers that enter it; an
    old paper that lost a listed neighbour is searched again. Without `index`, equal to
    searching everything again exactly, up to float rounding of the scores. Lists that no
    new paper enters are kept as they are, in their rows.

    Args:
        ids: the papers now, in order (sorted).
        previous: the candidate lists of the last papers (vectors unchanged since),
            trimmed (`trim_lists`) by the same `k` and `threshold`.
        index: a FAISS index of `vectors` (row numbers as ids) to search with
            (`indexed_update`); without it, new papers are searched against all exactly.
    """
    n = len(ids)
    current = pl.Series("paper_id", ids, dtype=pl.String)
    take = min(width, n - 1)
    if n == 0 or take <= 0:
        return Lists(current, *concat_triples([]))
    intact, floors, is_new = kept_lists(current, previous, k, take, threshold)
    search = np.flatnonzero(np.isinf(floors))  # new papers and old ones whose lists broke
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if index is None:
        lists, entering = exact_update(matrix, search, width, is_new, floors)
    else:
        lists, entering = indexed_update(index, matrix, search, width, threshold, is_new, floors)
    searched = trimmed(as_f64(lists), k, threshold)
    gaining = np.zeros(n, bool)
    gaining[entering[0]] = True
    gains = gaining[intact[0]]
    rows, cols, scores = concat_triples([take_rows(intact, gains), as_f64(entering)])
    order = np.lexsort((cols, -scores, rows))
    merged = trimmed((rows[order], cols[order], scores[order]), k, threshold, take)
    return Lists(current, *concat_triples([searched, merged, take_rows(intact, ~gains)]))


def kept_lists(
    current: pl.Series, previous: Lists, k: int, take: int, threshold: float
) -> tuple[Triples, np.ndarray, np.ndarray]:
    """What of `previous` holds for the papers `current`: the lists kept whole (by position
    in `current`), each paper's floor (the score a newcomer must reach to enter its list;
    inf for papers to search) and which papers are new."""
    n = current.len()
    place = pl.DataFrame({"paper_id": current, "at": np.arange(n, dtype=np.int64)})
    moved = (
        pl.DataFrame({"paper_id": previous.ids})
        .join(place, on="paper_id", how="left", maintain_order="left")["at"]
        .fill_null(-1)
        .to_numpy()
    )
    rows, cols = moved[previous.rows], moved[previous.cols]
    kept = rows >= 0
    broken = np.zeros(n, bool)
    broken[rows[kept & (cols < 0)]] = True
    kept &= ~broken[np.maximum(rows, 0)]
    rows, cols, scores = rows[kept], cols[kept], previous.scores[kept]
    starts, papers = list_runs(rows, scores)
    lengths = np.diff(np.r_[starts, len(rows)])
    ends = starts + lengths - 1
    # A list shorter than k (the set was smaller) could miss old papers: search again.
    whole = lengths >= min(k, take)
    is_new = np.ones(n, bool)
    is_new[moved[moved >= 0]] = False
    # Only lists a new paper enters change: their lowest score is what a newcomer must
    # reach (no other paper's list takes one).
    # A list of fewer than `take` rows was trimmed: a newcomer at the threshold enters it
    # too (a float32 at or below it: one that enters in vain is trimmed again).
    at_threshold = np.nextafter(np.float32(threshold), np.float32(-np.inf))
    floor = scores[ends].astype(np.float32)  # float32 scores
    floors = np.full(n, np.inf, dtype=np.float32)
    short = lengths < take
    floors[papers[whole]] = np.where(short, np.minimum(floor, at_threshold), floor)[whole]
    listed = np.zeros(n, bool)
    listed[papers[whole]] = True
    keep = listed[rows]
    return (rows[keep], cols[keep], scores[keep]), floors, is_new


def take_rows(triples: Triples, keep: np.ndarray) -> Triples:
    """The rows of `triples` where `keep`."""
    return tuple(part[keep] for part in triples)


def as_f64(triples: Triples) -> Triples:
    """Triples with float64 scores, as lists keep them (float32 scores widened)."""
    rows, cols, scores = triples
    return rows.astype(np.int64), cols.astype(np.int64), scores.astype(np.float64)


def exact_update(
    matrix: np.ndarray, search: np.ndarray, width: int, is_new: np.ndarray, floors: np.ndarray
) -> tuple[Triples, Triples]:
    """The lists of the papers at `search`, exactly against all papers, and the pairs
    (old paper, new paper, score) where a new paper enters an old paper's list (it reaches
    the old list's floor, `floors`: inf for papers searched)."""
    parts: list[Triples] = []

    def enter(here: np.ndarray, block: np.ndarray) -> None:
        # The new papers' products with all papers, made for their own lists, tell which.
        fresh = np.flatnonzero(is_new[here])
        for start in range(0, len(fresh), TOP_K_ROWS):  # a few rows at a time
            rows = fresh[start : start + TOP_K_ROWS]
            # Rows in a run are sliced, not gathered: a slice is a view, not a copy.
            together = rows[-1] - rows[0] + 1 == len(rows)
            part = block[rows[0] : rows[-1] + 1] if together else block[rows]
            at, old = positions(part >= floors)
            newcomers = here[rows][at]
            parts.append((old, newcomers, pair_scores(matrix, old, newcomers)))

    return exact_rows(matrix, search, width, enter), concat_triples(parts)


def indexed_update(
    index,
    matrix: np.ndarray,
    search: np.ndarray,
    width: int,
    threshold: float,
    is_new: np.ndarray,
    floors: np.ndarray,
) -> tuple[Triples, Triples]:
    """`exact_update` through an index of all papers, the new ones in it: each paper at
    `search` gets the `width` nearest the index finds; a new paper enters the lists of the
    old papers among the REVERSE_WIDTH x `width` nearest it finds whose floors it reaches.

    A new paper q enters an old paper p's list when p is near q for p, which is near q
    for q too unless q lies in a crowd denser than p's: looking further among q's nearest
    than q's own list reaches catches those (bench/ann_recall.py measures what is missed).
    Two new papers meet in the index, as old ones do.
    """
    fetch = max(width, REVERSE_WIDTH * width)
    cols, scores = index_search(index, matrix, search, fetch)
    lists = listed_rows(matrix, search, cols, scores, width, threshold)
    fresh = is_new[search]
    cols, scores = cols[fresh], scores[fresh]
    newcomers = np.broadcast_to(search[fresh][:, None], cols.shape)
    enters = (cols >= 0) & (scores >= floors[np.maximum(cols, 0)])
    return lists, (cols[enters], newcomers[enters], scores[enters])


def list_width(settings: Settings) -> int:
    """How many candidates a paper's list is searched for: its k neighbours and its pairs
    (at most PAIR_CAP)."""
    return max(settings.neighbors_k, PAIR_CAP)


def search_lists(
    ids: list[str],
    vectors: np.ndarray,
    settings: Settings,
    model_key: str,
    rows_task: Any = None,
) -> pl.DataFrame:
    """Each paper's candidate lists (`candidates`) as `trim_lists` keeps them, kept in the
    cache for the next run: the last run's lists updated where there are any; else a
    search, on the cluster's workers where there is one.

    Exact mode updates only exact lists (the result equals a new exact search). Above
    `exact_neighbors_max` (auto) an HNSW graph of the papers is kept per model beside the
    lists (`kept_graph`; the ivf method keeps an IVF index, `ann.kept_index`) and updated
    for the papers added and removed; the lists it left (or exact ones from a smaller
    warehouse) are updated through it: only new papers and papers that lost a neighbour
    are searched, so a run costs what changed.

    Args:
        model_key: names the vectors (model, weights, precision): only lists and indexes
            made for vectors of the same model are updated.
        rows_task: the Prefect task that runs `search_rows` on a worker (rows, matrix,
            graph, settings), where the flow runs on a Dask cluster.
    """
    width, kept = list_width(settings), (settings.neighbors_k, settings.duplicate_threshold)
    folder = settings.cache_path / "neighbors"
    exact_lists = NeighbourLists(folder, model_key, width, *kept)
    graph_lists = NeighbourLists(folder, f"{model_key}:graph", width, *kept)
    method = neighbor_method(settings.neighbors_method, len(ids), settings.exact_neighbors_max)
    exact = method == "exact"
    lists, other = (exact_lists, graph_lists) if exact else (graph_lists, exact_lists)
    previous = lists.load() or (None if exact else exact_lists.load())
    index = kept_search_index(folder, model_key, method, ids, vectors)
    if previous:
        updated = update_lists(ids, vectors, width, previous, *kept, index=index)
        came = updated.ids.is_in(previous.ids.implode()).not_().sum()
        run_logger().info(
            "neighbours: the last run's lists updated (%d papers new, %d gone)",
            came, previous.ids.len() - (updated.ids.len() - came),
        )  # fmt: skip
    else:  # a search's lists, trimmed as an update leaves them
        searched = as_f64(search_all(ids, vectors, settings, rows_task, index))
        updated = Lists(pl.Series("paper_id", ids, dtype=pl.String), *trimmed(searched, *kept))
    found = updated.frame()
    lists.save(updated)
    other.drop()  # one kind of list at a time: no stale ones
    return found


def kept_search_index(folder: Path, model_key: str, method: str, ids: list[str], vectors):
    """The index kept per model for `method` (hnsw: `kept_graph`, ivf: `ann.kept_index`),
    updated for `ids`; None for exact search. The other kind's files are dropped: an index
    is kept only while runs update it."""
    stores = {"hnsw": GraphStore(folder, model_key), "ivf": IndexStore(folder, model_key)}
    kind = method if ids else None
    for other, store in stores.items():
        if other != kind:
            store.drop()
    if kind == "hnsw":
        return kept_graph(stores["hnsw"], ids, vectors)
    return kept_index(stores["ivf"], ids, vectors) if kind == "ivf" else None


def search_all(
    ids: list[str], vectors: np.ndarray, settings: Settings, rows_task: Any = None, index=None
) -> Triples:
    """The rows of `candidates` of every paper (through `index` where given): here, or in
    pieces on the cluster's workers where the flow has some and `rows_task` runs a piece
    (`search_rows`)."""
    workers = cluster_workers() if rows_task is not None else 0
    search = (list_width(settings), settings.duplicate_threshold, settings.neighbors_method,
              settings.exact_neighbors_max)  # fmt: skip
    if not ids:
        return concat_triples([])
    if not workers:
        if index is None:
            method = neighbor_method(settings.neighbors_method, len(ids), search[3])
            index = approximate_index(method, ids, vectors)
        rows = np.arange(len(ids))
        if index is None:
            return exact_rows(vectors, rows, search[0])
        return index_rows(index, vectors, rows, *search[:2])

    def fan(ranges: list[tuple[int, int]], matrix: Path, graph: Path | None) -> list[Triples]:
        return fan_out(rows_task, ranges, matrix=matrix, graph=graph, settings=settings)

    folder = settings.cache_path / "neighbors"
    return nearest_in_pieces(ids, vectors, *search, folder, fan, 2 * workers, index)
