"""Great Expectations' Data Docs of the suite results: stored under the run's id, built
for the latest runs of each suite (the data-quality page, flows/validate/page/, is what
reads offline)."""

from __future__ import annotations

import shutil
from pathlib import Path

from flows.validate.gx import RESULTS, SITE, GxProject, SuiteResult

# Below a project's root: the file context's folder, its stored results and its site.
# Stored results per suite that the Data Docs show: each build of the index reads them
# all, so a few are kept; dq_results keeps every outcome.
KEEP_RESULTS = 10


def build_data_docs(
    root: Path, run_id: str, suite_results: list[SuiteResult], keep: int = KEEP_RESULTS
) -> Path | None:
    """Store a run's suite results and build their Data Docs pages and the index, over
    each suite's `keep` latest results; returns the index page.

    Args:
        root: the project's folder (warehouse/gx).
        suite_results: what the run's `Validator`s left to store (their `unstored`); a run
            with none leaves the Data Docs as they are.
    """
    index = root / SITE / "index.html"
    if not suite_results and index.exists():
        return index

    project = GxProject.at(root)
    stored = [project.store(run_id, result) for result in suite_results]
    prune_results(root, keep)
    if index.exists():  # the pages of this run's results and suites, and the index
        suites = (key.expectation_suite_identifier.name for key in stored)
        pages = [*stored, *project.suite_pages_due(suites)]
        project.context.build_data_docs(resource_identifiers=pages)
    else:
        project.context.build_data_docs()
    for site in project.context.get_docs_sites_urls():
        url = site.get("site_url") or ""
        if url.startswith("file://"):
            return Path(url.removeprefix("file://"))
    return None


def prune_results(root: Path, keep: int = KEEP_RESULTS) -> int:
    """Drop all but each suite's `keep` latest stored results, so that building the
    Data Docs does not slow down run after run (dq_results keeps every outcome)."""
    results, site = root / RESULTS, root / SITE
    removed = 0
    for suite in (p for p in results.glob("*") if p.is_dir()):
        # <run name>/<run time>: run names are run ids, so the time orders them.
        runs = sorted((p for p in suite.glob("*/*") if p.is_dir()), key=lambda p: p.name)
        for old in runs[:-keep] if keep else runs:
            # The result, and its page (the Data Docs are built only for new results).
            page = site / "validations" / old.relative_to(results)
            for folder in (old, page):
                shutil.rmtree(folder, ignore_errors=True)
                if folder.parent.is_dir() and not any(folder.parent.iterdir()):
                    folder.parent.rmdir()
            removed += 1
    return removed
