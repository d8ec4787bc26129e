"""The report's paper map: every paper at its place in an SVG viewBox, coloured by topic,
with each topic's name where its papers gather.

A version's map draws its paper_coordinates (a t-SNE made at publish time,
flows/derive/map.py); a version published before they existed gets a PCA of its
embeddings, made when the report is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import polars as pl

from flows.core.lake import read_sql
from flows.core.palette import topic_colour

# The paper map's SVG viewBox: its width, the range of its height (the height follows the
# map's shape, so a wide map leaves no empty band) and the margin kept clear of the frame.
MAP_WIDTH, MAP_HEIGHTS, MAP_PAD = 960, (360, 600), 18
MAP_LABEL_TERMS = 2  # a topic's label on the map: the first terms of its label
LABEL_CHAR, LABEL_LINE = 6.8, 14  # a map label's width per character and its line height


@dataclass
class PaperMap:
    """The map of papers, ready to draw in the SVG viewBox."""

    points: list[dict[str, Any]]  # paper_id, topic_id, x, y, color, tip: one per paper
    labels: list[dict[str, Any]]  # topic_id, text, x, y: at the median of its points
    method: str  # "t-SNE": the stored paper_coordinates; "PCA": projected by the report
    height: int  # of the viewBox; its width is MAP_WIDTH
    explained: tuple[float, float] | None = None  # PCA only: variance share of each axis


def project_2d(vectors: np.ndarray, seed: int) -> tuple[np.ndarray, tuple[float, float]]:
    """Project vectors to 2-D with PCA, for versions published without paper_coordinates.

    Returns:
        an (n, 2) array and the share of variance each axis explains.
    """
    from sklearn.decomposition import PCA

    n = vectors.shape[0]
    # PCA needs at least as many samples as components; one or no paper is a single dot.
    if n < 2:
        return np.zeros((n, 2)), (0.0, 0.0)
    # The full SVD is exact and repeatable; sklearn also fixes the sign of each axis.
    pca = PCA(n_components=2, svd_solver="full", random_state=seed)
    xy = pca.fit_transform(vectors.astype(np.float64))
    ratio = pca.explained_variance_ratio_
    return xy, (float(ratio[0]), float(ratio[1]))


def map_height(xy: np.ndarray, width: int = MAP_WIDTH, pad: int = MAP_PAD) -> int:
    """The viewBox height that fits the points' shape at `width`, within MAP_HEIGHTS."""
    if len(xy) < 2:
        return MAP_HEIGHTS[0]
    span = xy.max(axis=0) - xy.min(axis=0)
    shape = span[1] / span[0] if span[0] > 0 else np.inf
    return int(np.clip(round((width - 2 * pad) * shape + 2 * pad), *MAP_HEIGHTS))


def to_viewbox(xy: np.ndarray, width: int, height: int, pad: int = MAP_PAD) -> np.ndarray:
    """Scale points into an SVG viewBox, keeping the aspect ratio, y pointing up."""
    if xy.size == 0:
        return xy
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    span = np.where(hi - lo > 0, hi - lo, 1.0)
    scale = min((width - 2 * pad) / span[0], (height - 2 * pad) / span[1])
    centre = (lo + hi) / 2
    x = width / 2 + (xy[:, 0] - centre[0]) * scale
    y = height / 2 - (xy[:, 1] - centre[1]) * scale
    return np.column_stack([x, y]).round(1)


def paper_points(frame: pl.DataFrame, xy: np.ndarray, height: int) -> list[dict[str, Any]]:
    """Map points: each paper at its place in the viewBox, coloured by topic.

    Args:
        frame: paper_id, topic_id, title, one row per paper.
        xy: the papers' places, one row per row of `frame` (any scale: fitted to the box).
        height: the viewBox's.
    """
    points = []
    for (x, y), row in zip(
        to_viewbox(xy, MAP_WIDTH, height),
        frame.select("paper_id", "topic_id", "title").iter_rows(named=True),
        strict=True,
    ):
        points.append(
            {
                "paper_id": row["paper_id"],
                "topic_id": row["topic_id"],
                "x": float(x),
                "y": float(y),
                "color": topic_colour(row["topic_id"]),
                "tip": f"{row['title'] or '(no title)'}\n{row['paper_id']}",
            }
        )
    return points


def short_label(label: str | None, topic_id: int) -> str:
    """A topic's name on the map: the first MAP_LABEL_TERMS terms of its label, up to one
    that repeats a word of an earlier one ("adversarial network, generative adversarial"
    reads "adversarial network")."""
    if not label:
        return f"topic {topic_id}"
    terms: list[str] = []
    for term in (t.strip() for t in label.split(",")[:MAP_LABEL_TERMS]):
        if terms and set(term.split()) & {word for kept in terms for word in kept.split()}:
            break
        terms.append(term)
    return ", ".join(terms)


def topic_names(topic_id: int, label: str | None) -> dict[str, str]:
    """A topic's colour, its name on the map, and the rest of its label, which the legend
    shows after the map's name (set in bold) so the two read alike."""
    short = short_label(label, topic_id)
    label = label or short
    rest = label[len(short) :] if label.startswith(short) else f" ({label})"
    return {"color": topic_colour(topic_id), "map_label": short, "label_rest": rest}


def topic_labels(
    points: list[dict[str, Any]], topics: list[dict[str, Any]], height: int
) -> list[dict[str, Any]]:
    """A label for each topic on the map, at the median place of its points.

    A label that would cover one already placed (larger topics are placed first) moves up
    or down by a line until it is clear, or stays at its centre if no nearby line is.
    """
    placed: list[tuple[float, float, float, float]] = []  # x0, y0, x1, y1
    labels = []
    for topic in topics:
        mine = [(p["x"], p["y"]) for p in points if p["topic_id"] == topic["topic_id"]]
        if not mine:
            continue
        cx, cy = np.median(np.asarray(mine), axis=0)
        text = topic["map_label"]
        half = LABEL_CHAR * len(text) / 2 + 3
        cx = float(np.clip(cx, half + 2, MAP_WIDTH - half - 2))
        for shift in (0, -1, 1, -2, 2, -3, 3):
            y = float(np.clip(cy + shift * LABEL_LINE, LABEL_LINE, height - 4))
            box = (cx - half, y - LABEL_LINE + 3, cx + half, y + 3)
            if not any(overlaps(box, other) for other in placed):
                break
        else:
            y = float(np.clip(cy, LABEL_LINE, height - 4))
            box = (cx - half, y - LABEL_LINE + 3, cx + half, y + 3)
        placed.append(box)
        labels.append(
            {
                "topic_id": topic["topic_id"],
                "text": text,
                "x": round(cx, 1),
                "y": round(y, 1),
            }
        )
    return labels


def overlaps(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Whether two boxes (x0, y0, x1, y1) overlap."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def paper_map(con: duckdb.DuckDBPyConnection, topics: list[dict[str, Any]], seed: int) -> PaperMap:
    """The map: the version's paper_coordinates, or, for a version published before they
    existed, a PCA of its embeddings made now (scikit-learn is imported only then).

    Args:
        topics: topic_sizes rows with their map_label, largest first.
    """
    try:
        frame = con.execute(read_sql("report/paper_map")).pl()
        xy = frame.select("x", "y").to_numpy().astype(np.float64)
        method, explained = "t-SNE", None
    except duckdb.CatalogException:
        frame = con.execute(read_sql("report/paper_map_vectors")).pl()
        vectors = np.zeros((0, 1), dtype=np.float32)
        if frame.height:
            vectors = np.vstack([np.asarray(v, dtype=np.float32) for v in frame["embedding"]])
        xy, explained = project_2d(vectors, seed)
        method = "PCA"
    height = map_height(xy)
    points = paper_points(frame, xy, height)
    return PaperMap(points, topic_labels(points, topics, height), method, height, explained)
