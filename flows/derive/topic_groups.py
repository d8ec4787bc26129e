"""New topics from the papers that fit no old topic and the papers a run adds: average
linkage groups them (part by part where they are many), and a dense group that stands
apart from its papers' old topics becomes a topic (`new_groups`)."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import squareform
from sklearn.cluster import KMeans

from flows.derive.neighbours import positions

TOPIC_MIN_PAPERS = 10  # fewest papers a new topic forms from
# How many standard errors a group's papers must lie closer to one another than to their
# old topics to become a topic (`stands_apart`).
TOPIC_GROUP_T = 3.0
# Most open papers (new, or outliers near new ones) grouped at once: a part (`linked_parts`)
# of more is cut into pieces of at most this many (`cut_parts`). Memory grows with the
# square of a piece: 5,000 rows hold 200 MB of distances.
TOPIC_OUTLIERS_MAX = 5000
# Up to this many open papers are grouped at once; more are grouped part by part.
LINKED_PARTS_ROWS = 4096


def new_groups(
    vectors: np.ndarray,
    labels: np.ndarray,
    best: np.ndarray,
    open_rows: np.ndarray,
    fresh: np.ndarray | None,
) -> list[np.ndarray]:
    """The groups of `open_rows` (papers new or fitting no topic) that become new topics
    (`update_topics`). With `fresh` (whether each paper is new), outliers are grouped only
    near a new paper (`near_rows`). Fewer than TOPIC_MIN_PAPERS open papers form none, and
    nothing is computed for them (a +1 run). Above LINKED_PARTS_ROWS open papers they are
    grouped part by part (`linked_parts`), and a part of more than TOPIC_OUTLIERS_MAX is
    cut into pieces of at most that many first (`cut_parts`).

    Args:
        labels, best: each paper's topic and its cosine to that topic's centroid.
    """
    if len(open_rows) < TOPIC_MIN_PAPERS:
        return []
    settled = np.ones(len(vectors), bool)
    settled[open_rows] = False
    closeness = topic_closeness(vectors, labels, settled)
    if fresh is not None:  # the outliers a new group could hold: those near a new paper
        open_rows = near_rows(vectors, open_rows[~fresh[open_rows]], np.flatnonzero(fresh),
                              closeness)  # fmt: skip
        if len(open_rows) < TOPIC_MIN_PAPERS:
            return []
    rows, parts = vectors[open_rows], None
    if len(open_rows) > min(LINKED_PARTS_ROWS, TOPIC_OUTLIERS_MAX):
        parts = cut_parts(rows, linked_parts(rows, 1 - closeness), TOPIC_OUTLIERS_MAX)
    grouped = average_linkage(rows, 1 - closeness, parts)
    groups = []
    for label in np.unique(grouped):
        members = open_rows[grouped == label]
        if len(members) < TOPIC_MIN_PAPERS:
            continue
        if stands_apart(closeness_to_the_rest(vectors[members]) - best[members]):
            groups.append(members)
    return groups


def closeness_to_the_rest(members: np.ndarray) -> np.ndarray:
    """Each row's cosine to the mean of the other rows. A group's own centre holds a tenth
    of each of its 10 papers, which lifts their cosines to it: against the centre of all,
    11 of 21 groups of chance neighbours among 1,000 new generated abstracts seemed closer
    than to the papers' old topics and became topics."""
    rest = members.sum(axis=0, dtype=np.float64) - members
    lengths = np.maximum(np.linalg.norm(rest, axis=1), 1e-12)
    return np.einsum("ij,ij->i", members, rest) / lengths


def stands_apart(gain: np.ndarray) -> bool:
    """Whether a group's papers lie closer to one another than to their old topics beyond
    chance: `gain` (each paper's cosine to the rest of the group less its cosine to its
    old topic) averages TOPIC_GROUP_T standard errors above 0 or more.

    Chance groups among 1,000 new generated abstracts reached 0.4 (one of 21 above 0);
    new themes in the tests reach 72 to 141, and the group the 38 ICLR 2026 papers make
    among 826 real abstracts (20 papers) 5.1.
    """
    if len(gain) < 2:
        return False
    spread = gain.std(ddof=1) / np.sqrt(len(gain))
    return bool(gain.mean() > TOPIC_GROUP_T * spread) if spread > 0 else bool(gain.mean() > 0)


def near_rows(
    vectors: np.ndarray, outliers: np.ndarray, fresh: np.ndarray, closeness: float
) -> np.ndarray:
    """The rows `fresh` and those of `outliers` whose cosine to one of them reaches
    `closeness`, ascending: new papers and the papers that fit no topic which a group of
    new papers could gather. Papers that fit no topic accumulate until new ones come
    near them; a run groups what came with it and the outliers around that, not every
    outlier the warehouse holds (about 1.8% of its papers: 1,900 at 100,000)."""
    near = np.zeros(len(outliers), bool)
    if len(fresh):
        theirs = vectors[fresh].T
        for start in range(0, len(outliers), 4096):
            block = vectors[outliers[start : start + 4096]] @ theirs
            near[start : start + 4096] = block.max(axis=1) >= closeness
    return np.sort(np.concatenate([fresh, outliers[near]]))


def average_linkage(
    rows: np.ndarray, distance: float, parts: np.ndarray | None = None
) -> np.ndarray:
    """A group label per row: average-linkage clustering by cosine distance, merging while
    groups lie less than `distance` apart (as scikit-learn's AgglomerativeClustering with
    that distance_threshold); with `parts` (`linked_parts` of the rows), part by part.

    The distances come from one float64 matrix product, not scipy's pdist (which
    scikit-learn calls and which takes most of its time). The distances differ from
    pdist's by 1e-15 at most.
    """
    if parts is None:
        return linkage_groups(rows, distance)
    labels = np.empty(len(rows), np.int64)
    for members in rows_by_label(parts, np.arange(len(rows))):
        labels[members] = linkage_groups(rows[members], distance) + len(rows) * parts[members[0]]
    return labels


def linkage_groups(rows: np.ndarray, distance: float) -> np.ndarray:
    """`average_linkage` of all `rows` at once: labels from 1 up."""

    if len(rows) < 2:
        return np.ones(len(rows), dtype=np.int64)
    unit = rows.astype(np.float64)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    distances = unit @ unit.T
    np.subtract(1.0, distances, out=distances)
    np.maximum(distances, 0.0, out=distances)
    np.fill_diagonal(distances, 0.0)
    tree = linkage(squareform(distances, checks=False), method="average")
    # fcluster keeps merges at most t apart; scikit-learn those below the threshold.
    below = np.nextafter(distance, -np.inf)
    return fcluster(tree, t=below, criterion="distance").astype(np.int64)


def linked_parts(rows: np.ndarray, distance: float) -> np.ndarray:
    """A part label per row: the connected parts of the graph that joins rows less than
    `distance` apart (cosine). Average linkage merges two groups only where some pair of
    their rows lies that near, so each of its groups lies within one part: the parts can be
    grouped one by one, and the largest part, not all rows, sets the memory (10,000 rows
    grouped at once hold 800 MB of distances).

    The products are float32 in blocks of rows, and pairs within 1e-5 of `distance` are
    joined too: a part may hold more rows than it needs, never fewer.
    """

    n = len(rows)
    unit = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    floor = np.float32(1.0 - distance - 1e-5)
    head = np.arange(n)  # each row's part so far, named by its first row
    for start in range(0, n, 2048):
        near, other = positions(unit[start : start + 2048] @ unit.T >= floor)
        ends = (np.concatenate([start + near, np.arange(n)]), np.concatenate([other, head]))
        graph = csr_matrix((np.ones(len(ends[0]), np.int32), ends), shape=(n, n))
        _, labels = connected_components(graph, directed=False)
        head = np.unique(labels, return_index=True)[1][labels]
    return np.unique(head, return_inverse=True)[1].astype(np.int64)


def cut_parts(rows: np.ndarray, parts: np.ndarray, limit: int) -> np.ndarray:
    """`parts` (a part label per row) with each part of more than `limit` rows cut in two
    by seeded k-means, and the pieces again, until none holds more: average linkage then
    runs on at most `limit` rows at a time.

    A group that k-means cuts is grouped as two, each of which may still become a topic: a
    theme of more than `limit` open papers at once becomes several topics. Before, such a
    part re-fit every topic: at 300,000 generated abstracts the open papers of every +1%
    run lie in one part of about 8,000, and every run re-fit. Rows k-means cannot tell
    apart (copies) are cut in halves.
    """

    labels = parts.copy()
    pending = [m for m in rows_by_label(parts, np.arange(len(rows))) if len(m) > limit]
    fresh_label = int(labels.max(initial=-1)) + 1
    while pending:
        members = pending.pop()
        with warnings.catch_warnings():  # copies: k-means finds one cluster, and says so
            warnings.simplefilter("ignore")
            model = KMeans(n_clusters=2, n_init=1, random_state=0)
            side = model.fit_predict(rows[members].astype(np.float64)) == 1
        if side.all() or not side.any():
            side = np.arange(len(members)) >= len(members) // 2
        labels[members[side]] = fresh_label
        fresh_label += 1
        pending += [piece for piece in (members[~side], members[side]) if len(piece) > limit]
    return labels


def topic_closeness(vectors: np.ndarray, labels: np.ndarray, settled: np.ndarray) -> float:
    """How close the papers of a loose but real topic lie to one another: the lower
    quartile, over topics, of the mean cosine between a topic's settled papers (the first
    200 of each)."""
    closeness = []
    for rows in rows_by_label(labels, np.flatnonzero(settled)):
        members = vectors[rows[:200]].astype(np.float64)
        if len(members) >= 5:
            # The cosines of every pair add up to |sum|^2 less each vector's own (float64):
            # no matrix product of a topic's papers.
            total = members.sum(axis=0)
            pairs = total @ total - np.einsum("ij,ij->", members, members)
            closeness.append(pairs / (len(members) * (len(members) - 1)))
    return float(np.percentile(closeness, 25)) if closeness else 0.5


def rows_by_label(labels: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
    """`rows` parted by their label, ascending, each part in the order given: one sort, not
    a pass over every row for each label."""
    ordered = rows[np.argsort(labels[rows], kind="stable")]
    return np.split(ordered, np.flatnonzero(np.diff(labels[ordered])) + 1) if len(rows) else []
