"""Report: one self-contained HTML page describing a published version of the corpus.

Figures are gathered with the SQL in sql/report/, the paper map draws the version's
paper_coordinates (a t-SNE made at publish time, flows/derive/map.py), and the page is
rendered with jinja2 from flows/templates/report.html.j2.
Everything (SVG charts, CSS, a few lines of JS) is inline, so the file opens offline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

from flows.core.lake import (
    WarehouseError,
    define_paper_title,
    open_lake,
    published_versions,
    read_sql,
)
from flows.core.palette import topic_colour
from flows.core.settings import Settings
from flows.core.templates import templates

TEMPLATE = "report.html.j2"

# The paper map's SVG viewBox: its width, the range of its height (the height follows the
# map's shape, so a wide map leaves no empty band) and the margin kept clear of the frame.
MAP_WIDTH, MAP_HEIGHTS, MAP_PAD = 960, (360, 600), 18
TOP_DUPLICATES = 20
TOP_CHANGES = 10  # papers added, removed and changed that "What changed" lists, of each
TOP_MENTIONS = 15
LENGTH_BINS = 16

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


@dataclass
class Change:
    """What changed from the previous published version to this one."""

    previous: int
    added: int
    removed: int
    changed: int
    groups: list[dict[str, Any]]  # dimension, group, papers_a, papers_b, delta (delta != 0)
    new_duplicates: int
    papers: list[dict[str, Any]]  # change, old_id, new_id, title: TOP_CHANGES of each change


@dataclass
class Figures:
    """Every figure the report shows for one version."""

    version: int
    published_at: str
    summary: str
    totals: dict[str, Any]
    run: dict[str, Any] | None
    topics: list[dict[str, Any]]
    paper_map: PaperMap
    venues: list[dict[str, Any]]
    lengths: list[dict[str, Any]]
    dq_by_severity: list[dict[str, Any]]
    dq_failures: list[dict[str, Any]]
    duplicates: list[dict[str, Any]]
    mentions: list[dict[str, Any]] | None  # None: no mentions table at this version
    change: Change | None = None  # None: the first published version
    previous: int | None = None

    @property
    def dq_passed(self) -> int:
        return sum(r["passed"] for r in self.dq_by_severity)

    @property
    def dq_failed(self) -> int:
        return sum(r["failed"] for r in self.dq_by_severity)


def rows(con: duckdb.DuckDBPyConnection, name: str) -> list[dict[str, Any]]:
    """The rows of sql/report/<name>.sql as dicts."""
    return con.execute(read_sql(f"report/{name}")).pl().to_dicts()


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


def nice_width(span: float, bins: int) -> int:
    """A round bin width (1, 2, 2.5 or 5 times a power of ten) giving about `bins` bins."""
    raw = max(span / bins, 1.0)
    power = 10 ** math.floor(math.log10(raw))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= raw:
            return max(int(step * power), 1)
    return int(10 * power)


def length_histogram(word_counts: list[int], bins: int = LENGTH_BINS) -> list[dict[str, int]]:
    """Papers per abstract-length bin of a round width; bins are [lo, hi).

    Returns:
        one dict per bin from the shortest to the longest abstract: lo, hi, papers.
    """
    if not word_counts:
        return []
    counts = np.asarray(word_counts)
    width = nice_width(float(counts.max() - counts.min()), bins)
    start = int(counts.min()) // width * width
    stop = (int(counts.max()) // width + 1) * width
    edges = np.arange(start, stop + width, width)
    hist, _ = np.histogram(counts, bins=edges)
    return [
        {"lo": int(lo), "hi": int(hi), "papers": int(n)}
        for lo, hi, n in zip(edges[:-1], edges[1:], hist, strict=True)
    ]


def top_mentions(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]] | None:
    """The most-mentioned names, or None when the version has no mentions table."""
    try:
        return rows(con, "top_mentions")
    except duckdb.CatalogException:
        return None  # versions published before mentions existed


def gather(
    con: duckdb.DuckDBPyConnection, version: int, seed: int = 42, snapshot: dict | None = None
) -> Figures:
    """Every figure of the report from a connection with the version's tables in scope.

    Args:
        con: tables papers, embeddings, topics, paper_topics, venue_stats, duplicates,
            dq_results, runs (and mentions and paper_coordinates when present) in the
            default schema.
        version: the version shown; dq figures come from the run whose snapshot_id it is.
        seed: the seed of the PCA map of a version without paper_coordinates.
        snapshot: the version's catalog entry (time, summary), when known.
    """
    define_paper_title(con)
    con.execute(f"set variable version = {int(version)}")
    con.execute(f"set variable top_n = {TOP_DUPLICATES}")
    duplicates = rows(con, "top_duplicates")
    con.execute(f"set variable top_n = {TOP_MENTIONS}")
    mentions = top_mentions(con)

    topics = rows(con, "topic_sizes")
    for topic in topics:
        topic.update(topic_names(topic["topic_id"], topic["label"]))
    run = rows(con, "run_summary")
    snapshot = snapshot or {}
    return Figures(
        version=version,
        published_at=str(snapshot.get("time", "")),
        summary=str(snapshot.get("summary", "")),
        totals=rows(con, "totals")[0],
        run=run[0] if run else None,
        topics=topics,
        paper_map=paper_map(con, topics, seed),
        venues=rows(con, "venue_years"),
        lengths=length_histogram([r["word_count"] for r in rows(con, "word_counts")]),
        dq_by_severity=rows(con, "dq_by_severity"),
        dq_failures=rows(con, "dq_failures"),
        duplicates=duplicates,
        mentions=mentions,
    )


def change_since(settings: Settings, previous: int, version: int) -> Change:
    """Papers added, removed and changed (TOP_CHANGES of each by name), and group and
    near-duplicate changes."""
    from flows.publish import history

    diff = history.diff(settings, previous, version)
    counts = diff.counts()
    groups = diff.groups.filter(pl.col("delta") != 0).to_dicts()
    return Change(
        previous=previous,
        added=counts["added"],
        removed=counts["removed"],
        changed=counts["changed"],
        groups=groups,
        new_duplicates=diff.new_duplicates.height,
        papers=diff.papers.filter(pl.int_range(pl.len()).over("change") < TOP_CHANGES).to_dicts(),
    )


def build(settings: Settings, version: int | None = None) -> Figures:
    """The figures of a published version (default: the latest) of the warehouse.

    Raises:
        WarehouseError: no warehouse, nothing published, or `version` is not published.
    """
    with open_lake(settings, version, extensions=()) as con:
        published = published_versions(con)
        if not published:
            raise WarehouseError(f"{settings.warehouse} holds no published version yet")
        version = version if version is not None else published[-1]
        snapshots = con.execute(read_sql("catalog/versions")).pl()
        entry = snapshots.filter(pl.col("version") == version).to_dicts()
        figures = gather(con, version, settings.seed, entry[0] if entry else None)
    earlier = [v for v in published if v < version]
    if earlier:
        figures.previous = earlier[-1]
        # history.diff opens its own connection, so this one is closed first.
        figures.change = change_since(settings, earlier[-1], version)
    return figures


def point_radius(papers: int) -> float:
    """A map dot's radius: 6 up to 100 papers, smaller as they crowd (not below 3)."""
    return round(float(np.clip(6 * math.sqrt(100 / max(papers, 1)), 3, 6)), 1)


def render(figures: Figures) -> str:
    """The report page as HTML text."""
    return (
        templates()
        .get_template(TEMPLATE)
        .render(
            f=figures,
            map_width=MAP_WIDTH,
            point_radius=point_radius(len(figures.paper_map.points)),
            max_topic=max((t["papers"] for t in figures.topics), default=0),
            max_venue=max((v["papers"] for v in figures.venues), default=0),
            max_bin=max((b["papers"] for b in figures.lengths), default=0),
            max_mention=max((m["papers"] for m in figures.mentions or []), default=0),
        )
    )


def default_output(settings: Settings, version: int) -> Path:
    """Where a report goes when no file is named: warehouse/report-v<N>.html."""
    return settings.warehouse / f"report-v{version}.html"


def write_report(
    settings: Settings, version: int | None = None, output: Path | None = None
) -> Path:
    """Gather, render and write the report of a version; return the file written."""
    figures = build(settings, version)
    path = output or default_output(settings, figures.version)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(figures), encoding="utf-8")
    return path
