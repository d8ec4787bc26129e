"""Topics: seeded k-means over the unit vectors, or the last version's topics carried over
(papers keep their topic, new papers join their nearest, dense groups of what fits no
topic become new topics: topic_groups.py), with stable topic ids."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from scipy.optimize import linear_sum_assignment
from scipy.sparse import csr_matrix
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score

from flows.derive.topic_groups import new_groups, rows_by_label

SILHOUETTE_SAMPLE = 2000
FIT_SAMPLE = 50_000  # most papers a k-means fits; the others join their nearest centroid
PREDICT_ROWS = 50_000
TOPIC_MATCH_MIN = 0.9  # centroid cosine at which a topic counts as the same topic
# Share of papers that fit no old topic (or form new ones), above which topics are re-fit.
TOPIC_DRIFT_MAX = 0.25
# Cosine between a carried-over topic's centroid and its papers' mean down to which the
# centroid stays (`topic_frames`): 0.999 is 2.6 degrees, as far as about 4% of a topic's
# papers changing moves it (generated abstracts); a run adding 1% leaves most topics, and
# their papers' rows, as they were.
TOPIC_CENTROID_HOLD = 0.999


def choose_topic_count(vectors: np.ndarray, requested: int | None, seed: int) -> int:
    """The number of topics: as requested, else the best silhouette near sqrt(n / 2).

    Candidates run from 0.75x to 2x the rule of thumb; each is clustered on a sample of
    at most SILHOUETTE_SAMPLE papers and scored by cosine silhouette.
    """

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

    k = choose_topic_count(vectors, n_topics, seed)
    centroids, labels = fit_clusters(vectors, k, seed)
    kept = match_topics(centroids, previous or {})
    next_id = max(previous, default=-1) + 1 if previous else 0
    topic_of: dict[int, int] = {}
    for cluster in clusters_by_size(ids, labels):
        if cluster in kept:
            topic_of[cluster] = kept[cluster]
        else:
            topic_of[cluster], next_id = next_id, next_id + 1
    return *topic_frames(ids, vectors, labels, topic_of), f"{why}: {k} topics"


def fit_clusters(vectors: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded k-means: the k unit centroids and each paper's cluster.

    Up to FIT_SAMPLE papers the k-means fits them all. Above, it fits a seeded sample of
    FIT_SAMPLE and every paper joins its nearest centroid, PREDICT_ROWS at a time: a fit's
    time grows with papers x topics x iterations (a million papers into 707 topics took
    about 10 s an iteration here), a paper's assignment with papers x topics once.
    """
    n = len(vectors)
    if n <= FIT_SAMPLE:
        model = KMeans(n_clusters=k, random_state=seed, n_init=4).fit(vectors.astype(np.float64))
        return unit_rows(model.cluster_centers_), model.labels_.astype(np.int64)
    rng = np.random.default_rng(seed)
    sample = vectors[np.sort(rng.choice(n, size=FIT_SAMPLE, replace=False))]
    model = KMeans(n_clusters=k, random_state=seed, n_init=4).fit(sample.astype(np.float64))
    labels = np.concatenate(
        [
            model.predict(vectors[start : start + PREDICT_ROWS].astype(np.float64))
            for start in range(0, n, PREDICT_ROWS)
        ]
    )
    return unit_rows(model.cluster_centers_), labels.astype(np.int64)


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
    product, not one pass over the vectors per label."""

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
