"""The IVF index kept per model between runs (flows/derive/ann.py): updated for the papers
added and removed, it files them as one built afresh with its centroids, its lists recall
the exact neighbours, and a damaged or foreign index is trained again."""

from __future__ import annotations

import logging

import numpy as np
import polars as pl
import pytest

from flows.core import cache
from flows.core.settings import Settings
from flows.derive import ann, neighbour_lists, neighbours

DIM = 16


@pytest.fixture(autouse=True)
def few_probes(monkeypatch):
    """24 of the 66-71 lists of these tests scanned a query: a search that can miss, as at
    scale (IVF_PROBES of 632 lists at 100,000 papers), not one that scans them all."""
    monkeypatch.setattr(ann, "IVF_PROBES", 24)


def unit_vectors(n: int, seed: int) -> np.ndarray:
    """`n` random unit vectors of DIM dimensions, from `seed`."""
    rows = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


# 3,000 papers; the index is trained on the first 2,600, then 200 of them leave and the
# last 400 come.
EVERY = [f"p{i:04d}" for i in range(3000)]
VECTORS = unit_vectors(3000, seed=7)
BEFORE, GONE = EVERY[:2600], set(EVERY[1000:1200])
NOW = [p for p in EVERY if p not in GONE]


def matrix(ids: list[str]) -> np.ndarray:
    return VECTORS[[int(p[1:]) for p in ids]]


def recall(found: pl.DataFrame, exact: pl.DataFrame, k: int = 10) -> float:
    """The share of each paper's `k` exact nearest that `found` lists among its first `k`."""
    top = [neighbours.split_candidates(f, k, 1.0)[0] for f in (found, exact)]
    pairs = [set(t.select("paper_id", "neighbor_id").rows()) for t in top]
    return len(pairs[0] & pairs[1]) / len(pairs[1])


def test_an_index_updated_for_adds_and_removes_files_papers_as_one_built_afresh():
    """Updated, the index files each paper where an index built afresh from its centroids
    does (the same lists, so the same neighbours); the counts added and removed are said."""
    trained = ann.train(BEFORE, matrix(BEFORE))
    assert len(trained.centroids) == ann.list_count(2600) == 66
    again = ann.train(BEFORE, matrix(BEFORE))  # seeded: the same index
    assert np.array_equal(again.centroids, trained.centroids)
    updated, added, removed = ann.updated(trained, NOW, matrix(NOW))
    assert (added, removed) == (400, 200)
    fresh = ann.filed(NOW, ann.assign(trained.centroids, matrix(NOW)))
    assert updated.papers.sort("paper_id").equals(fresh.sort("paper_id"))
    rows = np.arange(len(NOW))
    found = [
        neighbours.index_search(ann.searchable(index, NOW, matrix(NOW)), matrix(NOW), rows, 10)
        for index in (updated, ann.PaperIndex(trained.centroids, fresh))
    ]
    assert np.array_equal(found[0][0], found[1][0])


def test_lists_updated_through_the_index_recall_the_exact_neighbours():
    """Lists searched through an index of the old papers, then updated through the index
    updated for 400 papers added and 200 removed: recall@10 against an exact search of the
    papers now at least 0.95, and no list names a paper gone."""
    index = ann.searchable(ann.train(BEFORE, matrix(BEFORE)), BEFORE, matrix(BEFORE))
    rows = np.arange(len(BEFORE))
    listed = neighbours.index_rows(index, matrix(BEFORE), rows, 32, 0.9)
    first = neighbours.id_frame(BEFORE, *listed)
    previous = neighbours.trim_lists(first, 10, 0.9)
    kept, _, _ = ann.updated(ann.train(BEFORE, matrix(BEFORE)), NOW, matrix(NOW))
    now_index = ann.searchable(kept, NOW, matrix(NOW))
    got = neighbour_lists.update_candidates(
        NOW, matrix(NOW), 32, previous, BEFORE, 10, 0.9, index=now_index
    )
    exact = neighbours.candidates(NOW, matrix(NOW), 32, 0.9, "exact")
    assert recall(got, exact) >= 0.95
    assert not got["neighbor_id"].is_in(sorted(GONE)).any()
    assert set(got["paper_id"]) == set(NOW)


def store_and_settings(tmp_path) -> tuple[ann.IndexStore, Settings]:
    settings = Settings(warehouse=tmp_path, exact_neighbors_max=100, neighbors_method="ivf")
    return ann.IndexStore(settings.cache_path / "neighbors", "model:weights:fp32"), settings


def test_search_lists_keep_the_index_and_update_it_on_the_next_run(tmp_path, caplog):
    """Above exact_neighbors_max a run trains an index and keeps it beside its lists; the
    next run loads it and files only the papers that came."""
    store, settings = store_and_settings(tmp_path)
    with caplog.at_level(logging.INFO):
        neighbour_lists.search_lists(BEFORE, matrix(BEFORE), settings, "model:weights:fp32")
        centroids = store.centroids_path.read_bytes()
        found = neighbour_lists.search_lists(NOW, matrix(NOW), settings, "model:weights:fp32")
    said = [r.getMessage() for r in caplog.records]
    assert "neighbours: a new index of 66 lists for 2600 papers" in said
    assert "neighbours: the kept index updated (400 papers added, 200 removed)" in said
    assert store.centroids_path.read_bytes() == centroids  # not trained again
    assert store.load(DIM).papers["paper_id"].sort().to_list() == sorted(NOW)
    exact = neighbours.candidates(NOW, matrix(NOW), 32, settings.duplicate_threshold, "exact")
    assert recall(found, exact) >= 0.95


@pytest.mark.parametrize("damage", ["truncated", "no seal"])
def test_a_damaged_index_is_trained_again_with_one_warning(tmp_path, caplog, damage):
    store, settings = store_and_settings(tmp_path)
    neighbour_lists.search_lists(BEFORE, matrix(BEFORE), settings, "model:weights:fp32")
    if damage == "truncated":
        store.papers_path.write_bytes(store.papers_path.read_bytes()[:200])
    else:
        cache.seal_path(store.centroids_path).unlink()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        neighbour_lists.search_lists(NOW, matrix(NOW), settings, "model:weights:fp32")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "is damaged" in warnings[0]
    assert "its papers are filed again in a new index" in warnings[0]
    assert "neighbours: a new index of 71 lists for 2800 papers" in caplog.text
    assert store.load(DIM).papers["paper_id"].sort().to_list() == sorted(NOW)


def test_an_index_of_another_dimension_or_model_is_not_used(tmp_path, caplog):
    store, _ = store_and_settings(tmp_path)
    index = ann.train(BEFORE, matrix(BEFORE))
    store.save(index, trained=True)
    other = ann.IndexStore(store.papers_path.parent, "model:other:fp32")
    assert other.load(DIM) is None and other.papers_path != store.papers_path
    with caplog.at_level(logging.WARNING):
        assert store.load(DIM * 2) is None
    assert "centroids of 16 dimensions for vectors of 32" in caplog.text
    assert not store.papers_path.exists() and not store.centroids_path.exists()


def test_below_the_exact_limit_no_index_is_kept(tmp_path):
    """Exact search (auto, below the limit) keeps no index, and drops one a larger
    warehouse left."""
    store, settings = store_and_settings(tmp_path)
    store.save(ann.train(BEFORE, matrix(BEFORE)), trained=True)
    few = EVERY[:50]
    auto = settings.model_copy(update={"neighbors_method": "auto"})
    neighbour_lists.search_lists(few, matrix(few), auto, "model:weights:fp32")
    assert not store.papers_path.exists() and not store.centroids_path.exists()
