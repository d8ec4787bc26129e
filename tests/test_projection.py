"""The map's projection: near papers near, inside [-1, 1], stable across versions."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from flows.derive import map as projection


def clusters(n_per: int, n_clusters: int = 3, dim: int = 16, seed: int = 0) -> np.ndarray:
    """Unit vectors in tight, well-separated clusters (rows grouped by cluster)."""
    rng = np.random.default_rng(seed)
    centres = np.eye(dim)[:n_clusters] * 4
    rows = np.repeat(centres, n_per, axis=0) + rng.normal(scale=0.3, size=(n_per * n_clusters, dim))
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_fresh_map_keeps_clusters_apart_and_fits_the_square():
    vectors = clusters(12)
    ids = [f"p{i:02d}" for i in range(len(vectors))]
    frame, note = projection.paper_coordinates(ids, vectors, seed=0)
    assert note == "drawn afresh by t-SNE (36 papers, 36 new)"
    assert frame["paper_id"].to_list() == ids
    coords = frame.select("x", "y").to_numpy()
    assert np.abs(coords).max() == pytest.approx(1.0)
    centres = np.stack([coords[i * 12 : (i + 1) * 12].mean(axis=0) for i in range(3)])
    spread = max(np.linalg.norm(coords[i * 12 : (i + 1) * 12] - centres[i], axis=1).max()
                 for i in range(3))  # fmt: skip
    gaps = [np.linalg.norm(centres[a] - centres[b]) for a, b in ((0, 1), (0, 2), (1, 2))]
    assert min(gaps) > 2 * spread  # every cluster lies apart from the others


def test_fresh_map_keeps_each_papers_nearest_papers_near():
    """10-neighbour trustworthiness of the drawn map, on 300 papers in 12 noisy themes."""
    from sklearn.manifold import trustworthiness

    rng = np.random.default_rng(1)
    centres = rng.normal(size=(12, 64))
    rows = np.repeat(centres, 25, axis=0) + rng.normal(scale=1.2, size=(300, 64))
    vectors = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    coords = projection.fit_map(vectors, seed=0)
    assert trustworthiness(vectors, coords, n_neighbors=10, metric="cosine") > 0.97
    # The two principal axes, the map t-SNE replaces, keep far less.
    centred = vectors - vectors.mean(axis=0)
    axes = np.linalg.svd(centred, full_matrices=False)[0][:, :2]
    assert trustworthiness(vectors, axes, n_neighbors=10, metric="cosine") < 0.85


def test_same_input_gives_the_same_map():
    vectors = clusters(8)
    ids = [f"p{i:02d}" for i in range(len(vectors))]
    first, _ = projection.paper_coordinates(ids, vectors, seed=3)
    again, _ = projection.paper_coordinates(ids, vectors, seed=3)
    assert first.equals(again)


def test_old_papers_keep_their_places_and_new_ones_join_their_cluster():
    vectors = clusters(12)
    ids = [f"p{i:02d}" for i in range(len(vectors))]
    old = [i for i in range(36) if i not in (0, 12)]  # one paper of clusters 0 and 1 is new
    before, _ = projection.paper_coordinates([ids[i] for i in old], vectors[old], seed=0)
    previous = {r["paper_id"]: (r["x"], r["y"]) for r in before.iter_rows(named=True)}
    after, note = projection.paper_coordinates(ids, vectors, seed=0, previous=before)
    assert note == "kept: 34 papers in place, 2 new placed by their neighbours"
    places = {r["paper_id"]: (r["x"], r["y"]) for r in after.iter_rows(named=True)}
    assert all(places[i] == previous[i] for i in previous)
    for new, cluster in (("p00", range(1, 12)), ("p12", range(13, 24))):
        mates = np.array([previous[ids[i]] for i in cluster])
        others = np.array([xy for pid, xy in previous.items() if int(pid[1:]) not in cluster])
        distance = np.linalg.norm(mates - places[new], axis=1).mean()
        assert distance < np.linalg.norm(others - places[new], axis=1).mean() / 2


@pytest.mark.parametrize("width", [20, 6, 3])
def test_new_papers_placed_from_exact_lists_land_where_the_full_search_puts_them(width):
    """Lists of 20 hold 5 placed papers for every new one; lists of 6 may not (their papers
    fall back to the search); lists of 3 never do."""
    from flows.derive import neighbours

    vectors = clusters(20, n_clusters=4, dim=24, seed=5)
    ids = [f"p{i:02d}" for i in range(len(vectors))]
    old = [i for i in range(80) if i % 5]  # 16 new papers, 4 in each cluster
    before, _ = projection.paper_coordinates([ids[i] for i in old], vectors[old], seed=0)
    lists = neighbours.candidates(ids, vectors, width, 0.99, "exact")
    searched, _ = projection.paper_coordinates(ids, vectors, seed=0, previous=before)
    listed, note = projection.paper_coordinates(ids, vectors, 0, before, lists)
    assert note == "kept: 64 papers in place, 16 new placed by their neighbours"
    assert listed["paper_id"].to_list() == searched["paper_id"].to_list()
    np.testing.assert_allclose(
        listed.select("x", "y").to_numpy(), searched.select("x", "y").to_numpy(), atol=2e-5
    )
    _, done = projection.place_by_lists([ids[i] for i in range(0, 80, 5)], lists, before)
    assert int(done.sum()) == {20: 16, 6: 13, 3: 0}[width]  # 3 of 16 fall back at 6


def test_many_new_papers_redraw_the_map():
    vectors = clusters(8)
    ids = [f"p{i:02d}" for i in range(len(vectors))]
    previous = pl.DataFrame({"paper_id": ids[:10], "x": [0.5] * 10, "y": [0.5] * 10})  # 14 new
    frame, note = projection.paper_coordinates(ids, vectors, seed=0, previous=previous)
    assert note == "drawn afresh by t-SNE (24 papers, 14 new)"
    assert frame.filter(x=0.5, y=0.5).height == 0


@pytest.mark.parametrize("n", [0, 1, 2, 4])
def test_tiny_sets_get_a_place_each(n):
    vectors = clusters(4, n_clusters=1)[:n]
    frame, _ = projection.paper_coordinates([f"p{i}" for i in range(n)], vectors, seed=0)
    coords = frame.select("x", "y").to_numpy()
    assert frame.height == n
    if n == 1:
        assert coords.tolist() == [[0.0, 0.0]]
    if n > 1:  # distinct places filling the square
        assert np.abs(coords).max() == pytest.approx(1.0)
        assert len({tuple(xy) for xy in coords}) == n


def test_above_the_fit_limit_a_sample_is_laid_out_and_the_rest_placed(monkeypatch):
    monkeypatch.setattr(projection, "MAP_FIT_MAX", 24)
    vectors = clusters(20)  # 60 papers: 24 laid out by t-SNE, 36 placed
    coords = projection.project(vectors, seed=0)
    assert coords.shape == (60, 2) and np.abs(coords).max() == pytest.approx(1.0)
    assert np.array_equal(coords, projection.project(vectors, seed=0))  # seeded sample
    centres = np.stack([coords[i * 20 : (i + 1) * 20].mean(axis=0) for i in range(3)])
    spread = max(np.linalg.norm(coords[i * 20 : (i + 1) * 20] - centres[i], axis=1).max()
                 for i in range(3))  # fmt: skip
    gaps = [np.linalg.norm(centres[a] - centres[b]) for a, b in ((0, 1), (0, 2), (1, 2))]
    assert min(gaps) > 2 * spread  # placed papers join their own cluster
