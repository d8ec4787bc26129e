"""The map of papers: a neighbour-preserving 2-D projection of the embeddings (t-SNE),
made at publish time and kept in place from one version to the next.

t-SNE (scikit-learn, already a dependency) and not UMAP: umap-learn brings numba and
llvmlite, whose JIT compiles for seconds in every new process, for maps of the same kind;
t-SNE keeps what a map of papers is for, that near papers lie near, where PCA's two axes
do not (trustworthiness at 10 neighbours, figures in `project`).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from sklearn.decomposition import PCA
from sklearn.manifold import TSNE

# A version whose papers are more than this share new is drawn afresh; below it the old
# papers keep their places and new ones are placed among their nearest old papers.
MAP_REFIT_SHARE = 0.25
PLACE_NEIGHBOURS = 5  # old papers that place a new one
PLACE_ROWS = 128
MAP_FIT_MAX = 10_000  # most papers the t-SNE itself lays out; the rest are placed
PERPLEXITY = 30.0
PCA_DIMS = 50  # t-SNE's neighbour search runs on this many principal components
# t-SNE's iterations, 250 of them early exaggeration. Half of scikit-learn's default 1,000
# keeps 10-neighbour trustworthiness (826 real abstracts of ../corpora: 0.9638 against
# 0.9643; 1,000 generated ones: 0.9027 against 0.9014) in about half the time.
TSNE_ITERATIONS = 500
DIGITS = 5  # coordinates are rounded: same inputs, same published bytes
SCHEMA = {"paper_id": pl.String, "x": pl.Float64, "y": pl.Float64}


def project(vectors: np.ndarray, seed: int) -> np.ndarray:
    """2-D coordinates in [-1, 1] for unit-norm `vectors`: a t-SNE (`fit_map`) of at most
    MAP_FIT_MAX of them, a seeded sample, and the others placed among their nearest
    sampled papers (`place`), so a large warehouse's map costs about what 10,000 papers'
    does: t-SNE's time grows faster than its papers."""
    n = len(vectors)
    if n <= MAP_FIT_MAX:
        return fit_map(vectors, seed)
    sample = np.sort(np.random.default_rng(seed).choice(n, size=MAP_FIT_MAX, replace=False))
    rest = np.setdiff1d(np.arange(n), sample)
    coords = np.zeros((n, 2))
    coords[sample] = fit_map(vectors[sample], seed)
    coords[rest] = place(vectors[rest], vectors[sample], coords[sample])
    return scaled(coords)


def fit_map(vectors: np.ndarray, seed: int) -> np.ndarray:
    """2-D coordinates in [-1, 1] for unit-norm `vectors`, near papers near.

    t-SNE on cosine distance, perplexity 30 (less for small sets: it must stay below the
    number of papers), PCA initialisation (stable layout, seeded), after a reduction to
    PCA_DIMS components, which about halves its time. On 1,000 and 5,000 clustered 384-d
    vectors it keeps 10-neighbour trustworthiness at 0.99 and 0.98, where PCA's two axes
    give 0.90 and 0.89. Below five papers there is nothing to preserve: their first two
    principal components are used.
    """
    n = len(vectors)
    if n == 0:
        return np.zeros((0, 2))
    if n < 5:
        centred = vectors - vectors.mean(axis=0)
        coords = np.zeros((n, 2))
        if n > 1:
            u, s, _ = np.linalg.svd(centred.astype(np.float64), full_matrices=False)
            width = min(2, len(s))
            coords[:, :width] = u[:, :width] * s[:width]
    else:
        reduced = vectors
        if vectors.shape[1] > PCA_DIMS and n > PCA_DIMS:
            reduced = PCA(PCA_DIMS, random_state=seed).fit_transform(vectors)
        coords = TSNE(
            n_components=2,
            perplexity=min(PERPLEXITY, (n - 1) / 3),
            metric="cosine",
            init="pca",
            learning_rate="auto",
            max_iter=TSNE_ITERATIONS,
            random_state=seed,
        ).fit_transform(reduced.astype(np.float32))
    return scaled(coords)


def scaled(coords: np.ndarray) -> np.ndarray:
    """Centred on the origin and scaled into [-1, 1] (aspect kept), in float64."""
    coords = np.asarray(coords, dtype=np.float64)
    coords = coords - (coords.max(axis=0) + coords.min(axis=0)) / 2
    reach = np.abs(coords).max()
    return coords / reach if reach > 0 else coords


def place(vectors: np.ndarray, anchors: np.ndarray, anchor_coords: np.ndarray) -> np.ndarray:
    """Coordinates for new papers: the similarity-weighted mean of the places of their
    PLACE_NEIGHBOURS most similar placed papers (`anchors`), so each lies among them and
    inside the map."""
    out = np.zeros((len(vectors), 2))
    take = min(PLACE_NEIGHBOURS, len(anchors))
    # A few rows at a time: the partition's index arrays stay in cache.
    for start in range(0, len(vectors), PLACE_ROWS):
        sims = vectors[start : start + PLACE_ROWS] @ anchors.T
        nearest = np.argpartition(-sims, take - 1, axis=1)[:, :take]  # no full sort
        weights = np.clip(np.take_along_axis(sims, nearest, axis=1), 0.0, None)
        weights[weights.sum(axis=1) == 0] = 1.0  # nothing similar: the plain mean
        weights /= weights.sum(axis=1, keepdims=True)
        out[start : start + PLACE_ROWS] = np.einsum("ij,ijk->ik", weights, anchor_coords[nearest])
    return out


def place_by_lists(
    new_ids: list[str], lists: pl.DataFrame, placed: pl.DataFrame
) -> tuple[np.ndarray, np.ndarray]:
    """`place` for new papers from their candidate lists (paper_id, neighbor_id, score):
    the PLACE_NEIGHBOURS most similar placed papers on each list, the same weights. Where
    the lists are exact this is `place`, without a new papers x placed papers product.

    Returns:
        coordinates, one row per new paper, and whether each was placed: a list with fewer
        placed papers than `place` takes leaves its paper to `place`.
    """
    take = min(PLACE_NEIGHBOURS, placed.height)
    order = pl.DataFrame({"paper_id": new_ids}, schema={"paper_id": pl.String})
    near = (
        lists.join(order, on="paper_id", how="semi")
        .join(placed.rename({"paper_id": "neighbor_id"}), on="neighbor_id", how="inner")
        .sort(["paper_id", "score", "neighbor_id"], descending=[False, True, False])
        .group_by("paper_id", maintain_order=True)
        .head(take)
        .with_columns(weight=pl.col("score").clip(lower_bound=0.0))
        # nothing similar: the plain mean, as `place`
        .with_columns(
            weight=pl.when(pl.col("weight").sum().over("paper_id") == 0)
            .then(1.0)
            .otherwise(pl.col("weight"))
        )
        .group_by("paper_id")
        .agg(
            found=pl.len(),
            x=(pl.col("weight") * pl.col("x")).sum() / pl.col("weight").sum(),
            y=(pl.col("weight") * pl.col("y")).sum() / pl.col("weight").sum(),
        )
    )
    rows = order.join(near, on="paper_id", how="left", maintain_order="left")
    done = (rows["found"].fill_null(0) >= take).to_numpy()
    return rows.select("x", "y").fill_null(0.0).to_numpy(), done


def paper_coordinates(
    ids: list[str],
    vectors: np.ndarray,
    seed: int,
    previous: pl.DataFrame | None = None,
    lists: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, str]:
    """The paper_coordinates table (paper_id, x, y) and what was done, in words.

    Args:
        ids: paper ids, one per row of `vectors` (unit norm).
        previous: each paper's place in the previous version (paper_id, x, y); its papers
            keep their places unless more than MAP_REFIT_SHARE of `ids` are new. A frame,
            not a dict: a join is quicker than a dict of every paper.
        lists: each paper's nearest papers (paper_id, neighbor_id, score), as the
            neighbour stage found them: new papers are placed from these (`place_by_lists`)
            where they hold enough placed papers.
    """
    if not ids:
        return pl.DataFrame(schema=SCHEMA), "no papers"
    if previous is None:
        previous = pl.DataFrame(schema=SCHEMA)
    order = pl.DataFrame({"paper_id": ids}, schema={"paper_id": pl.String})
    joined = order.join(previous.cast(SCHEMA), on="paper_id", how="left", maintain_order="left")
    kept = joined["x"].is_not_null().to_numpy()
    placed = joined.filter(kept)
    new = int((~kept).sum())
    if not kept.any() or new / len(ids) > MAP_REFIT_SHARE:
        coords = project(vectors, seed)
        note = f"drawn afresh by t-SNE ({len(ids)} papers, {new} new)"
    else:
        coords = np.zeros((len(ids), 2))
        coords[kept] = placed.select("x", "y").to_numpy()
        if new:
            fresh = np.flatnonzero(~kept)
            done = np.zeros(len(fresh), dtype=bool)
            if lists is not None:
                found, done = place_by_lists([ids[i] for i in fresh], lists, placed)
                coords[fresh[done]] = found[done]
            if not done.all():
                rest = fresh[~done]
                coords[rest] = place(vectors[rest], vectors[kept], coords[kept])
        note = f"kept: {int(kept.sum())} papers in place, {new} new placed by their neighbours"
    frame = pl.DataFrame(
        {"paper_id": ids, "x": coords[:, 0].round(DIGITS), "y": coords[:, 1].round(DIGITS)},
        schema=SCHEMA,
    ).sort("paper_id")
    return frame, note
