"""Report: one self-contained HTML page describing a published version of the corpus.

Figures are gathered with the SQL in sql/report/ (figures.py), the paper map draws the
version's paper_coordinates (paper_map.py), and the page is rendered with jinja2 from
flows/templates/report.html.j2. Everything (SVG charts, CSS, a few lines of JS) is
inline, so the file opens offline.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from flows.core.settings import Settings
from flows.core.templates import templates
from flows.read.figures import Figures, build
from flows.read.paper_map import MAP_WIDTH

TEMPLATE = "report.html.j2"


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
