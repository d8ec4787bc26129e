"""Recall@10 of the kept HNSW graph (flows/derive/kept_graph.py, `--index graph`, auto's) or
the kept IVF index (flows/derive/ann.py, `--index ivf`) against exact search, for a first
run and for a +1% run that updates it.

A first run of N papers makes an index; the next run removes 1% of them, adds 1% new
ones and updates the kept index (the graph: the papers that came inserted, those gone left
out of its searches; IVF: its centroids kept, the papers that came filed). For a
seeded sample of papers (and every paper added) the 10 nearest the index finds are
compared with their exact 10 nearest (one matrix product): recall@10 of the first run's
index, of the updated one, and of an index trained afresh for the second run's papers at
the same parameters. Seconds of each step beside. `--lists` searches every paper's list
in the first run and updates them all through the updated index (`update_candidates`),
as a run does, and measures the lists' recall: the first run then searches N papers.

Vectors: `--random` draws unit vectors (no structure: a hard case for any index);
`--cheap-embedder` embeds generated abstracts (bench/corpus.py) with the cheap random
model of bench/cheap_model.py at 384 dimensions, as all-MiniLM-L6-v2 gives, kept in
WORK/vectors-<n>.npy (embedding 102,000 abstracts takes tens of minutes on two cores);
`--vectors FILE` reads such a file.

    python bench/ann_recall.py --cheap-embedder [--n 100000] [--work DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from flows.derive import ann, kept_graph, neighbour_lists, neighbours  # noqa: E402

K, WIDTH, THRESHOLD = 10, 32, 0.95  # paperlake's defaults: neighbors_k, list width, pairs


def cheap_vectors(count: int, work: Path) -> np.ndarray:
    """`count` generated abstracts embedded by the cheap model (hidden 384), kept in `work`."""
    path = work / f"vectors-{count}.npy"
    if not path.exists():
        from cheap_model import build
        from corpus import abstracts

        from flows.embed import encode

        model = build(work / "cheap-model-384", hidden=384)
        vectors = encode(abstracts(count), model=str(model), show_progress=False)
        np.save(path, vectors)
    return np.load(path)


def random_vectors(count: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def exact_top(matrix: np.ndarray, rows: np.ndarray) -> dict[int, set[int]]:
    """The exact K nearest other rows of each of `rows`."""
    sims = matrix[rows] @ matrix.T
    sims[np.arange(len(rows)), rows] = -np.inf
    return {
        int(r): set(np.argpartition(-s, K)[:K].tolist()) for r, s in zip(rows, sims, strict=True)
    }


def recall(found: pl.DataFrame, ids: list[str], truth: dict[int, set[int]]) -> float:
    """The share of the exact K nearest in the first K of each list of `found`."""
    row = {p: i for i, p in enumerate(ids)}
    top, _ = neighbours.split_candidates(found, K, THRESHOLD)
    sample = [ids[r] for r in truth]
    top = top.filter(pl.col("paper_id").is_in(sample))
    got: dict[int, set[int]] = {r: set() for r in truth}
    for paper, neighbour in top.select("paper_id", "neighbor_id").iter_rows():
        got[row[paper]].add(row[neighbour])
    return sum(len(got[r] & truth[r]) for r in truth) / (K * len(truth))


def searched(index, ids: list[str], matrix: np.ndarray, rows: np.ndarray) -> pl.DataFrame:
    return neighbours.id_frame(ids, *neighbours.index_rows(index, matrix, rows, WIDTH, THRESHOLD))


class Kind:
    """How a kind of kept index is made, updated and made afresh (ivf or graph)."""

    def __init__(self, name: str):
        self.name = name
        self.label = "graph" if name == "graph" else "IVF index"

    def first(self, ids: list[str], matrix: np.ndarray):
        """(what is kept, the index to search, how it is named)."""
        if self.name == "ivf":
            kept = ann.train(ids, matrix)
            return kept, ann.searchable(kept, ids, matrix), f"{len(kept.centroids)} lists"
        graph = kept_graph.built(ids, matrix)
        return graph, graph.graph, f"HNSW graph, search breadth {ann.HNSW_SEARCH_BREADTH}"

    def updated(self, kept, ids: list[str], matrix: np.ndarray):
        if self.name == "ivf":
            return ann.searchable(ann.updated(kept, ids, matrix)[0], ids, matrix)
        return kept_graph.searchable(kept_graph.placed(kept, ids, matrix)[0])

    def fresh(self, ids: list[str], matrix: np.ndarray):
        if self.name == "ivf":
            return ann.fresh_index(ids, matrix)
        return kept_graph.built(ids, matrix).graph


def measure(
    vectors: np.ndarray, n: int, sample: int, seed: int, lists: bool, kind: Kind
) -> list[tuple[str, float, float]]:
    """(step, recall@10, seconds) of a first run of `n` papers and a +1% run: the index's
    search for the sampled papers, or with `lists` every list searched and then updated."""
    rng = np.random.default_rng(seed)
    every = [f"p{i:07d}" for i in range(len(vectors))]
    before = every[:n]
    gone = set(rng.choice(before, n // 100, replace=False).tolist())
    now = [p for p in every[: n + n // 100] if p not in gone]
    old, new = vectors[:n], vectors[[int(p[1:]) for p in now]]
    rows = np.sort(rng.choice(n, sample, replace=False))
    start = time.perf_counter()
    kept, index, named = kind.first(before, old)
    first = searched(index, before, old, np.arange(n) if lists else rows)
    seconds = time.perf_counter() - start
    truth = exact_top(old, rows)
    out = [(f"first run, {n:,} papers, {named}", recall(first, before, truth), seconds)]
    is_new = np.flatnonzero(~np.isin(now, before))
    rows = np.union1d(is_new, rng.choice(len(now), sample, replace=False))
    truth, added = exact_top(new, rows), exact_top(new, is_new)
    start = time.perf_counter()
    index = kind.updated(kept, now, new)
    if lists:
        previous = neighbours.trim_lists(first, K, THRESHOLD)
        found = neighbour_lists.update_candidates(
            now, new, WIDTH, previous, before, K, THRESHOLD, index
        )
    else:
        found = searched(index, now, new, rows)
    seconds = time.perf_counter() - start
    step = f"+1% run ({len(is_new):,} added, {len(gone):,} removed), the kept {kind.label} updated"
    out += [(step, recall(found, now, truth), seconds),
            ("  of which the papers added", recall(found, now, added), 0.0)]  # fmt: skip
    start = time.perf_counter()
    fresh = searched(kind.fresh(now, new), now, new, rows)
    seconds = time.perf_counter() - start
    out.append((f"the {kind.label} made afresh for the +1% run's papers", recall(fresh, now, truth),
                seconds))  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cheap-embedder", action="store_true")
    source.add_argument("--random", action="store_true")
    source.add_argument("--vectors", type=Path, help="a .npy of unit vectors, n + n/100 rows")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--sample", type=int, default=2000, help="papers compared with exact")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--index", choices=["graph", "ivf"], default="graph",
        help="the kept HNSW graph (auto's) or the kept IVF index",
    )  # fmt: skip
    parser.add_argument(
        "--lists", action="store_true", help="search every paper's list, then update them"
    )
    parser.add_argument(
        "--work", type=Path, default=ROOT / "bench" / "out", help="where vectors are kept"
    )
    args = parser.parse_args()
    count = args.n + args.n // 100
    if args.vectors:
        vectors = np.load(args.vectors)[:count]
    elif args.random:
        vectors = random_vectors(count)
    else:
        args.work.mkdir(parents=True, exist_ok=True)
        vectors = cheap_vectors(count, args.work)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    print(
        f"{len(vectors):,} vectors of {vectors.shape[1]} dimensions; lists probed: {ann.IVF_PROBES}"
    )
    kind = Kind(args.index)
    for step, value, seconds in measure(vectors, args.n, args.sample, args.seed, args.lists, kind):
        print(f"{step:<72} recall@10 {value:.4f}  {seconds:7.1f} s")


if __name__ == "__main__":
    main()
