"""What a run does once its version is committed, beside the pipeline's story: the Data
Docs, the version's data-quality page, the compaction that is due. The version is
published already: a write that fails here (a full disk) is a warning, not the run's
failure."""

from __future__ import annotations

import time
from typing import Any

import duckdb

from flows import validate
from flows.core import run_record as record
from flows.core.settings import Settings
from flows.publish.compaction import compact_when_due


def write_data_docs(settings: Settings, run_id: str, suite_results: list) -> str | None:
    """Store `suite_results` (from `validate_tables`) and build their Data Docs pages;
    returns the index page (None where they cannot be written: a full disk costs the run
    its Data Docs, a view only, with a warning)."""
    try:
        index = validate.build_data_docs(settings.warehouse / "gx", run_id, suite_results)
    except OSError as exc:
        record.run_logger().warning("the Data Docs were not written: %s", exc)
        return None
    return str(index) if index else None


def write_page(summary: record.RunSummary, settings: Settings, page: Any, version: int) -> None:
    """The version's page, as `paperlake dq --version N` writes it: warehouse/dq-v<N>.html.
    The version is published already: a page that cannot be written (a full disk) is a
    warning of the run, not its failure."""
    try:
        output = validate.page_path(settings, version)
        summary.dq_page = str(validate.save_page(page, settings, output))
    except OSError as exc:
        summary.warnings.append(
            f"version {version} is published, but its data-quality page was not written "
            f"({exc.strerror or exc}: {exc.filename}); `paperlake dq` writes it"
        )
        record.run_logger().warning(summary.warnings[-1])


def compact_catalog_when_due(settings: Settings, version: int) -> None:
    """Merge the catalog's files every `settings.compact_every` versions (still under the
    run lock, once the version's page is gathered), and say so in the run's log. A
    compaction that fails leaves the version published, and is tried again next run."""
    t = time.perf_counter()
    try:
        done = compact_when_due(settings, version)
    except duckdb.Error as exc:
        record.run_logger().warning("compaction failed (version %d is published): %s",
                                    version, exc)  # fmt: skip
        return
    if done:
        record.run_logger().info(
            "compacted the catalog (due every %d versions): %d live files became %d, "
            "%d files no version reads removed, in %.1f s", settings.compact_every,
            sum(done.files_before.values()), sum(done.files_after.values()), done.removed,
            time.perf_counter() - t,
        )  # fmt: skip
