"""The HNSW graph kept per model between runs (flows/derive/kept_graph.py): the papers a run
adds are inserted, the papers gone are never listed, lists updated through it recall the
exact neighbours as well as a graph built afresh, and a damaged, foreign or stale graph
is built again."""

from __future__ import annotations

import logging

import faiss
import numpy as np
import pytest

from flows.core import cache
from flows.core.settings import Settings
from flows.derive import kept_graph, neighbour_lists, neighbours
from tests.test_ann import BEFORE, DIM, GONE, NOW, matrix, recall

MODEL = "model:weights:fp32"


def store_and_settings(tmp_path) -> tuple[kept_graph.GraphStore, Settings]:
    settings = Settings(warehouse=tmp_path, exact_neighbors_max=100)  # auto: the graph
    return kept_graph.GraphStore(settings.cache_path / "neighbors", MODEL), settings


def test_a_graph_updated_for_adds_and_removes_lists_what_one_built_afresh_lists():
    """Lists searched through a graph of the old papers, then updated through the same
    graph with 400 papers inserted and 200 gone: recall@10 against an exact search of the
    papers now at least 0.95 and within 0.01 of lists searched through a graph built
    afresh for them (the same parameters); no list names a paper gone."""
    first = kept_graph.built(BEFORE, matrix(BEFORE))
    rows = np.arange(len(BEFORE))
    listed = neighbours.index_rows(first.graph, matrix(BEFORE), rows, 32, 0.9)
    previous = neighbours.trim_lists(neighbours.id_frame(BEFORE, *listed), 10, 0.9)
    kept, added, gone = kept_graph.placed(first, NOW, matrix(NOW))
    assert (added, gone, kept.graph.ntotal) == (400, 200, 3000)  # the gone stay in it
    assert set(kept.slots.gather(np.flatnonzero(kept.rows < 0))) == GONE
    got = neighbour_lists.update_candidates(
        NOW, matrix(NOW), 32, previous, BEFORE, 10, 0.9, index=kept_graph.searchable(kept)
    )
    exact = neighbours.candidates(NOW, matrix(NOW), 32, 0.9, "exact")
    fresh = neighbours.candidates(NOW, matrix(NOW), 32, 0.9, "hnsw")
    assert recall(got, exact) >= 0.95
    assert recall(got, exact) >= recall(fresh, exact) - 0.01
    assert not got["neighbor_id"].is_in(sorted(GONE)).any()
    assert set(got["paper_id"]) == set(NOW)


def test_a_graph_never_names_a_paper_gone_even_its_own_copy():
    """A paper gone that is a query's nearest (its copy) is skipped: the search lists the
    next paper, as a graph without it would."""
    vectors = matrix(BEFORE)
    kept, _, _ = kept_graph.placed(kept_graph.built(BEFORE, vectors), BEFORE[1:], vectors[1:])
    scores, rows = kept.search(vectors[:1], 3)
    order = np.argsort(-(vectors[1:] @ vectors[0]))[:3]
    assert rows[0].tolist() == order.tolist()
    assert np.allclose(scores[0], (vectors[1:] @ vectors[0])[order], atol=1e-5)


def test_search_lists_keep_the_graph_and_insert_only_the_papers_that_came(tmp_path, caplog):
    """Above exact_neighbors_max (auto) a run builds a graph and keeps it beside its lists;
    the next run inserts only the 400 papers that came and leaves the 200 gone out; the
    same papers make the same graph file."""
    store, settings = store_and_settings(tmp_path)
    with caplog.at_level(logging.INFO):
        neighbour_lists.search_lists(BEFORE, matrix(BEFORE), settings, MODEL)
        first = store.graph_path.read_bytes()
        found = neighbour_lists.search_lists(NOW, matrix(NOW), settings, MODEL)
    said = [r.getMessage() for r in caplog.records]
    assert "neighbours: a new graph of 2600 papers" in said
    assert "neighbours: the kept graph updated (400 papers added, 200 gone)" in said
    again = tmp_path / "again.faiss"
    faiss.write_index(kept_graph.built(BEFORE, matrix(BEFORE)).graph, str(again))
    assert again.read_bytes() == first  # one thread: the same papers, the same graph
    loaded = store.load(DIM)
    assert loaded.graph.ntotal == 3000 and loaded.slots.to_list() == BEFORE + EVERY_NEW
    exact = neighbours.candidates(NOW, matrix(NOW), 32, settings.duplicate_threshold, "exact")
    assert recall(found, exact) >= 0.95
    assert not list(store.graph_path.parent.glob("index-*"))  # no IVF index kept beside


EVERY_NEW = [p for p in NOW if p not in BEFORE]


@pytest.mark.parametrize("damage", ["truncated", "no seal", "slots of another graph"])
def test_a_damaged_graph_is_built_again_with_one_warning(tmp_path, caplog, damage):
    store, settings = store_and_settings(tmp_path)
    neighbour_lists.search_lists(BEFORE, matrix(BEFORE), settings, MODEL)
    if damage == "truncated":
        store.graph_path.write_bytes(store.graph_path.read_bytes()[:5000])
    elif damage == "no seal":
        cache.seal_path(store.graph_path).unlink()
    else:
        cache.write_parquet(store.slots_path, store.load(DIM).slots.head(100).to_frame())
    caplog.clear()
    with caplog.at_level(logging.INFO):
        found = neighbour_lists.search_lists(NOW, matrix(NOW), settings, MODEL)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "is damaged" in warnings[0], warnings
    assert "its papers are inserted again in a new graph" in warnings[0]
    assert "neighbours: a new graph of 2800 papers" in caplog.text
    assert store.load(DIM).slots.to_list() == NOW
    exact = neighbours.candidates(NOW, matrix(NOW), 32, settings.duplicate_threshold, "exact")
    assert recall(found, exact) >= 0.95


def test_a_graph_of_another_dimension_or_model_is_not_used(tmp_path, caplog):
    store, _ = store_and_settings(tmp_path)
    store.save(kept_graph.built(BEFORE, matrix(BEFORE)))
    other = kept_graph.GraphStore(store.graph_path.parent, "model:other:fp32")
    assert other.load(DIM) is None and other.graph_path != store.graph_path
    with caplog.at_level(logging.WARNING):
        assert store.load(DIM * 2) is None
    assert "vectors of 16 dimensions where the run's have 32" in caplog.text
    assert not store.graph_path.exists() and not store.slots_path.exists()


def test_a_graph_whose_papers_are_mostly_gone_is_built_again(tmp_path, caplog):
    """More than GRAPH_STALE of its papers gone: a new graph of the papers now, kept."""
    store, _ = store_and_settings(tmp_path)
    store.save(kept_graph.built(BEFORE, matrix(BEFORE)))
    now = BEFORE[:1500] + NOW[-400:]  # 1,100 gone, 400 new (not inserted in the old graph)
    with caplog.at_level(logging.INFO):
        graph = kept_graph.kept_graph(store, now, matrix(now))
    assert "neighbours: 1100 of the kept graph's 2600 papers are gone" in caplog.text
    assert "neighbours: a new graph of 1900 papers" in caplog.text
    assert graph.ntotal == 1900 and store.load(DIM).slots.to_list() == now


def test_the_same_update_of_the_same_graph_makes_the_same_graph(tmp_path):
    """Inserts run on one thread in the order of the run's papers: two runs that update
    one graph for the same papers keep the same bytes (so publish the same neighbours)."""
    made = []
    faiss.omp_set_num_threads(2)
    for _ in range(2):
        kept, _, _ = kept_graph.placed(kept_graph.built(BEFORE, matrix(BEFORE)), NOW, matrix(NOW))
        path = tmp_path / f"graph-{len(made)}.faiss"
        faiss.write_index(kept.graph, str(path))
        made.append(path.read_bytes())
    assert made[0] == made[1]
    assert faiss.omp_get_max_threads() == 2  # the threads FAISS had before, given back


def test_an_updated_graph_goes_to_a_clusters_workers_with_its_rows(tmp_path):
    """A graph whose slots are not the run's rows (updated: new papers at its end, papers
    gone in it) is written with each slot's row for the workers (`nearest_in_pieces`);
    their lists equal the lists searched here through the same graph."""
    kept, _, _ = kept_graph.placed(kept_graph.built(BEFORE, matrix(BEFORE)), NOW, matrix(NOW))
    index = kept_graph.searchable(kept)
    assert isinstance(index, kept_graph.KeptGraph)  # not the FAISS index itself

    def fan(ranges, matrix_file, graph):
        assert kept_graph.rows_path(graph).exists()
        return [neighbours.search_rows(r, matrix_file, graph, 32, 0.9) for r in ranges]

    spread = neighbours.id_frame(NOW, *neighbours.nearest_in_pieces(
        NOW, matrix(NOW), 32, 0.9, "hnsw", 100, tmp_path / "work", fan, 3, index
    ))  # fmt: skip
    here = neighbours.id_frame(
        NOW, *neighbours.index_rows(index, matrix(NOW), np.arange(len(NOW)), 32, 0.9)
    )
    assert spread.equals(here)
    assert not spread["neighbor_id"].is_in(sorted(GONE)).any()
    assert not list((tmp_path / "work").iterdir())  # the files for the workers are gone


def test_a_run_stopped_between_the_graph_and_its_slots_leaves_no_pair_to_trust(
    tmp_path, monkeypatch, caplog
):
    """The slots are dropped before a new graph is written: a run stopped after writing
    the graph leaves it without slots, and the next run builds a graph again (it never
    reads a graph through another graph's slots, even of the same size)."""
    store, _ = store_and_settings(tmp_path)
    store.save(kept_graph.built(BEFORE, matrix(BEFORE)))
    others = [p for p in NOW if p not in BEFORE] + BEFORE[400:]  # 2,600 other papers
    assert len(others) == 2600

    def stopped(path, frame, whole=True):
        raise KeyboardInterrupt

    monkeypatch.setattr(cache, "write_parquet", stopped)
    with pytest.raises(KeyboardInterrupt):
        store.save(kept_graph.built(others, matrix(others)))
    monkeypatch.undo()
    assert store.graph_path.exists() and not store.slots_path.exists()
    with caplog.at_level(logging.INFO):
        graph = kept_graph.kept_graph(store, others, matrix(others))
    assert "neighbours: a new graph of 2600 papers" in caplog.text
    assert graph.ntotal == 2600 and store.load(DIM).slots.to_list() == others
