"""The data-quality page as HTML (flows/templates/dq.html.j2) and as JSON, and its files."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from flows.core.settings import Settings
from flows.core.templates import templates
from flows.validate.gx import SITE
from flows.validate.page.gather import build_page, build_run_page
from flows.validate.page.page import Page

TEMPLATE = "dq.html.j2"
# The Data Docs index of the Great Expectations project at warehouse/gx.
DATA_DOCS_INDEX = Path("gx") / SITE / "index.html"


def render_page(page: Page) -> str:
    """The page as HTML text."""
    return templates().get_template(TEMPLATE).render(p=page)


def page_as_json(page: Page) -> dict[str, Any]:
    """The page's content for machines: one object per expectation result."""
    expectations = []
    for suite in page.suites:
        for check in suite.checks:
            item = asdict(check)
            item["outcome"] = check.outcome
            item["failing_rows"] = item.pop("rows")
            item["more_failing_rows"] = item.pop("more_rows")
            item["table"] = suite.name
            expectations.append(item)
    return {
        "version": page.version,
        "run_id": page.run_id,
        "started_at": page.started_at,
        "outcome": page.outcome,
        "lines": [f"{label}: {text}" for label, text in page.lines],
        "suites": [
            {
                "suite": s.name,
                "status": s.status,
                "rows_checked": s.rows_checked,
                "passed": s.passed,
                "failed_blocking": s.failed_blocking,
                "failed_warning": s.failed_warning,
            }
            for s in page.suites
        ],
        "expectations": expectations,
        "files": page.files,
        "trend": [asdict(t) for t in page.trend],
        "data_docs": page.data_docs,
        "headlines": [asdict(h) for h in page.headlines],
        "rejects": {
            "total": page.rejects_total,
            "listed": page.rejects_listed,
            "query": page.rejects_query,
            "groups": [asdict(g) | {"more": g.more} for g in page.rejects],
        },
    }


def link_data_docs(page: Page, settings: Settings, path: Path | None = None) -> None:
    """Point the page at its warehouse, and at the GX Data Docs when they exist: relative
    to the page's file `path`, or as the index's own path."""
    page.warehouse = str(settings.warehouse)
    index = settings.warehouse / DATA_DOCS_INDEX
    if not index.exists():
        return
    page.data_docs = str(index) if path is None else os.path.relpath(index, path.parent)


def page_path(settings: Settings, version: int) -> Path:
    """Where a version's page goes when no file is named: warehouse/dq-v<N>.html."""
    return settings.warehouse / f"dq-v{version}.html"


def write_version_page(
    settings: Settings, version: int | None = None, output: Path | None = None
) -> Path:
    """Build, render and write the page of a published version; return the file."""
    page = build_page(settings, version)
    path = output or page_path(settings, page.version)
    return save_page(page, settings, path)


def write_run_page(
    con: duckdb.DuckDBPyConnection, settings: Settings, run_id: str, results: pl.DataFrame
) -> Path:
    """The page of a run stopped before publish: warehouse/dq/<run_id>.html."""
    page = build_run_page(con, settings, run_id, results)
    return save_page(page, settings, settings.dq_path / f"{run_id}.html")


def save_page(page: Page, settings: Settings, path: Path) -> Path:
    """Write the page, linked to the Data Docs, at `path`; return the file."""
    link_data_docs(page, settings, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_page(page), encoding="utf-8")
    return path
