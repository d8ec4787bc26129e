"""The stage runner: what runs when, and the run's books.

The pipeline (flows/pipeline.py) names its stages in order; the runner runs each as a
Prefect task, or beside the next one as a Prefect future (on the flow's task runner: threads
here, workers on a Dask cluster), and keeps the books beside them: each stage's seconds,
counts and log line (flows/core/run_record.py), the gate before publish, and what follows a
commit (the Data Docs, the version's data-quality page, a due compaction, the artifacts).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import duckdb
import polars as pl

from flows import validate
from flows.core import run_record as record
from flows.core.held import Texts
from flows.core.lake import staged
from flows.core.settings import Settings
from flows.publish import compact_when_due
from flows.tasks import validate_tables

# How each stage's outcome is recorded: (summary, what the stage returned, seconds).
KEEPERS: dict[str, Callable[[record.RunSummary, Any, float], None]] = {
    "ingest": lambda summary, ingested, seconds: record.ingested(
        summary, ingested.result, ingested.papers, ingested.paper_sources.height, seconds
    ),
    "embed": record.embedded,
    "derive": record.derived,
    "publish": lambda summary, published, seconds: record.published(summary, *published, seconds),
}


class StageRunner:
    """Runs one run's stages and keeps its summary (`summary`)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.summary = record.new_summary(settings)

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    def stage(self, name: str, task: Any, *args: Any) -> Any:
        """Run the stage `name` (a task) now; record its seconds and counts."""
        started = time.perf_counter()
        result = task(*args)
        KEEPERS[name](self.summary, result, time.perf_counter() - started)
        record.stage_ended(self.summary, name)
        return result

    def beside(self, task: Any, *args: Any) -> Any:
        """Start `task` on the flow's task runner, to run beside what follows: its future."""
        return task.submit(*args)

    def up_to_date(self, version: int | None) -> record.RunSummary:
        """The outcome of a run whose inputs and settings the latest version was built from."""
        self.summary.version, self.summary.status = version, "up to date"
        record.run_logger().info(
            "up to date at version %s: raw files and settings unchanged", version
        )
        record.report_artifacts(self.summary, None)
        return self.summary

    def validate(
        self, early: Any, tables: dict[str, pl.DataFrame], parameters: dict
    ) -> tuple[pl.DataFrame, list]:
        """Every suite's dq_results rows and the references between tables: the suites of
        the tables `early` (a `validate_tables` future) checked, then the rest."""
        started = time.perf_counter()
        rows, suite_results = early.result()
        rest = {name: frame for name, frame in tables.items() if name not in set(rows["suite"])}
        later, later_results = validate_tables(rest, self.settings, self.run_id, parameters)
        order = {name: i for i, name in enumerate(validate.suite_names())}
        results = pl.concat(
            [
                pl.concat([rows, later]).sort(
                    pl.col("suite").replace_strict(order, default=len(order)),
                    maintain_order=True,
                ),
                validate.check_references(tables, self.run_id),
            ]
        )
        record.write_dq_file(self.settings, self.run_id, results)
        outcome = validate.outcome(results)
        record.validated(self.summary, outcome, results, time.perf_counter() - started)
        record.stage_ended(self.summary, "validate")
        return results, [*suite_results, *later_results]

    def gate(
        self, tables: dict[str, pl.DataFrame], results: pl.DataFrame, docs: list, texts: Texts
    ) -> None:
        """Stop before publish where a blocking check failed: the stopped run gets its page
        (warehouse/dq/<run_id>.html, from the run's own tables, the papers' abstracts read
        back through `texts`) and its Data Docs."""
        failures = validate.blocking_failures(results)
        if not failures.height:
            return
        self.summary.status = "failed"
        self.summary.data_docs = write_data_docs(self.settings, self.run_id, docs)
        con = staged(tables | {"papers": texts.filled(tables["papers"])})
        try:
            page = validate.write_run_page(con, self.settings, self.run_id, results)
            self.summary.dq_page = str(page)
        finally:
            con.close()
        record.report_artifacts(self.summary, results)
        raise validate.DataQualityError(failures)

    def check_history(self, tables: dict[str, pl.DataFrame], parameters: dict) -> pl.DataFrame:
        """The run's own rows (runs, dq_results) checked by their suites before the commit:
        dq_results with those checks' rows added. A blocking failure stops the publish."""
        history = {name: tables[name] for name in ("runs", "dq_results")}
        rows, _ = validate_tables(history, self.settings, self.run_id, parameters)
        failures = validate.blocking_failures(rows)
        if failures.height:
            self.summary.status = "failed"
            raise validate.DataQualityError(failures)
        return pl.concat([tables["dq_results"], rows])

    def after_commit(self, version: int, results: pl.DataFrame, docs: list) -> None:
        """What follows the commit of `version`: its Data Docs, its page, a due compaction,
        the run's artifacts. The version is published already: a write that fails here is
        a warning of the run, not its failure."""
        self.summary.data_docs = write_data_docs(self.settings, self.run_id, docs)
        page = validate.build_page(self.settings, version)
        compact_catalog_when_due(self.settings, version)
        write_page(self.summary, self.settings, page, version)
        record.report_artifacts(self.summary, results)


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
