"""Validate: run the Great Expectations suites in expectations/ against staged tables.

Suites are JSON files, one per table. Severity `critical` marks a blocking check: a
failure stops the publish. Results become dq_results rows and HTML Data Docs, where each
result is named by the paperlake run and its table and each expectation carries its
severity; the Data Docs load their styles from CDNs, so flows/dq/ writes the page that
reads offline.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from flows import tables
from flows.settings import EXPECTATIONS_DIR

BATCH_ROWS = 200_000
KEEP_RESULTS = 30  # stored results per suite that the Data Docs show
SAMPLE_IDS = 20
DQ_SCHEMA = {
    "run_id": pl.String,
    "suite": pl.String,
    "expectation": pl.String,
    "column_name": pl.String,
    "kwargs": pl.String,
    "severity": pl.String,
    "blocking": pl.Boolean,
    "success": pl.Boolean,
    "element_count": pl.Int64,
    "unexpected_count": pl.Int64,
    "unexpected_ids": pl.List(pl.String),
    "observed_value": pl.String,
}


class DataQualityError(RuntimeError):
    """Blocking expectations failed; the run must not publish."""

    def __init__(self, failures: pl.DataFrame):
        self.failures = failures
        lines = [describe_failure(r) for r in failures.iter_rows(named=True)]
        super().__init__("blocking data-quality checks failed:\n  " + "\n  ".join(lines))


def describe_failure(row: dict, shown: int = 5) -> str:
    """One line naming a failed expectation, its column and the first offending rows."""
    text = f"{row['suite']}.{row['expectation']}({row['column_name'] or ''})"
    if row["unexpected_count"]:
        text += f": {row['unexpected_count']} unexpected"
    ids = row["unexpected_ids"] or []
    if ids:
        more = row["unexpected_count"] - shown if (row["unexpected_count"] or 0) > shown else 0
        text += f" in rows {', '.join(ids[:shown])}" + (f" and {more} more" if more else "")
    if row["observed_value"] and not ids:
        text += f": observed {row['observed_value']}"
    return text


@dataclass(frozen=True)
class Suite:
    """A suite file from expectations/; failing rows are named by the table's key."""

    name: str
    id_columns: tuple[str, ...]
    expectations: tuple[dict, ...]

    @classmethod
    def load(cls, name: str, folder: Path = EXPECTATIONS_DIR) -> Suite:
        path = folder / f"{name}.json"
        spec = json.loads(path.read_text())
        return cls(
            name=spec["name"],
            id_columns=tables.table(spec["name"]).keys,
            expectations=tuple(spec["expectations"]),
        )


def suite_names(folder: Path = EXPECTATIONS_DIR) -> list[str]:
    """The tables that have a suite: one expectations/<table>.json each."""
    return sorted(p.stem for p in folder.glob("*.json"))


def prepare(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """The frame a suite checks: the table plus the derived columns its suite names."""
    if table == "papers":
        flags = pl.col("flags").list.len() if "flags" in frame.columns else pl.lit(0)
        return frame.with_columns(
            unresolved_macro_count=pl.col("unresolved_macros").list.len(),
            flag_count=flags.cast(pl.Int64),
        ).drop(
            "links",
            "authors",
            "keywords",
            "categories",
            "flags",
            "unresolved_macros",
            "abstract_raw",
            strict=False,
        )
    if table == "sources":
        return frame.with_columns(
            accounted=pl.col("accepted") + pl.col("rejected"),
            reject_share=pl.when(pl.col("records_seen") > 0)
            .then(pl.col("rejected") / pl.col("records_seen"))
            .otherwise(0.0),
        )
    if table == "embeddings":
        return frame.select(
            "paper_id",
            "model",
            "dim",
            nan_count=pl.col("embedding").list.eval(pl.element().is_nan()).list.sum(),
            norm=pl.col("embedding").list.eval(pl.element().pow(2)).list.sum().sqrt(),
        )
    return frame.select(pl.exclude(pl.List(pl.Utf8), pl.List(pl.Float32)))


def _quiet_gx() -> None:
    """No analytics, no chatter: set before Great Expectations is imported."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    for name in ("great_expectations", "great_expectations.core", "tzlocal"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="great_expectations")


class Validator:
    """A Great Expectations file context under warehouse/gx that runs suites on frames."""

    def __init__(self, root: Path, run_id: str):
        _quiet_gx()
        import great_expectations as gx

        self.gx = gx
        self.run_id = run_id
        root.mkdir(parents=True, exist_ok=True)
        self.context = gx.get_context(mode="file", project_root_dir=str(root))
        self.context.variables.progress_bars = {"globally": False}
        self.source = self.context.data_sources.add_or_update_pandas("paperlake")
        self.results: list[pl.DataFrame] = []

    def _definition(self, suite: Suite):
        from great_expectations.expectations.expectation_configuration import (
            ExpectationConfiguration,
        )

        gx = self.gx
        try:
            asset = self.source.get_asset(suite.name)
        except LookupError:
            asset = self.source.add_dataframe_asset(name=suite.name)
        try:
            batch = asset.get_batch_definition("whole")
        except KeyError:
            batch = asset.add_batch_definition_whole_dataframe("whole")
        expectations = [
            ExpectationConfiguration(
                type=e["type"],
                kwargs=e["kwargs"],
                severity=e.get("severity", "critical"),
                meta=severity_meta(e.get("severity", "critical")),
                notes=severity_note(e.get("severity", "critical")),
            ).to_domain_obj()
            for e in suite.expectations
        ]
        gx_suite = self.context.suites.add_or_update(
            gx.ExpectationSuite(name=suite.name, expectations=expectations)
        )
        return batch, gx_suite

    def validate(self, table: str, frame: pl.DataFrame, parameters: dict) -> pl.DataFrame:
        """Run the suite named `table` on `frame` (in batches); return its dq_results rows."""
        suite = Suite.load(table)
        whole, gx_suite = self._definition(suite)
        prepared = prepare(table, frame)
        batches = [prepared] if prepared.height <= BATCH_ROWS else prepared.iter_slices(BATCH_ROWS)
        result_format = {
            "result_format": "COMPLETE",
            "unexpected_index_column_names": list(suite.id_columns),
            "partial_unexpected_count": SAMPLE_IDS,
            # GX would show a pandas query on a frame that only existed inside the run.
            "return_unexpected_index_query": False,
        }
        rows: list[dict] = []
        for batch in batches:
            result = whole.get_batch(batch_parameters={"dataframe": batch.to_pandas()}).validate(
                gx_suite, expectation_parameters=parameters, result_format=result_format
            )
            self._store(suite.name, result)
            rows.extend(self._rows(suite, result.results))
        out = _merge_batches(pl.DataFrame(rows, schema=DQ_SCHEMA))
        self.results.append(out)
        return out

    def _store(self, table: str, result) -> None:
        """Keep a suite result for the Data Docs under the run's id and the table's name.

        Stored here rather than by a ValidationDefinition run, which names every result
        `__none__` and a dataframe batch's asset None, and would have to be stored twice.
        """
        from great_expectations.core.run_identifier import RunIdentifier
        from great_expectations.data_context.types.resource_identifiers import (
            ExpectationSuiteIdentifier,
            ValidationResultIdentifier,
        )

        # One run time per batch, so that batches of one table never share a key.
        run = RunIdentifier(run_name=self.run_id, run_time=datetime.now(UTC))
        result.meta["run_id"] = run
        result.meta["validation_time"] = run.run_time
        result.meta["batch_spec"] = {
            **(result.meta.get("batch_spec") or {}),
            "data_asset_name": table,
        }
        suite_key = ExpectationSuiteIdentifier(name=table)
        key = ValidationResultIdentifier(
            expectation_suite_identifier=suite_key, run_id=run, batch_identifier=result.batch_id
        )
        self.context.validation_results_store.store_validation_results(result, key, suite_key)

    def _rows(self, suite: Suite, results) -> list[dict]:
        rows = []
        for res in results:
            config = res.expectation_config
            kwargs = {k: v for k, v in config.kwargs.items() if k != "batch_id"}
            detail = res.result or {}
            ids = [
                "/".join(str(item.get(c)) for c in suite.id_columns if c in item)
                for item in (detail.get("unexpected_index_list") or [])[:SAMPLE_IDS]
                if isinstance(item, dict)
            ]
            observed = detail.get("observed_value")
            severity = getattr(config.severity, "value", str(config.severity))
            rows.append(
                {
                    "run_id": self.run_id,
                    "suite": suite.name,
                    "expectation": config.type,
                    "column_name": kwargs.get("column")
                    or ",".join(kwargs.get("column_list", []))
                    or ",".join(c for c in (kwargs.get("column_A"), kwargs.get("column_B")) if c)
                    or None,
                    "kwargs": json.dumps(kwargs, sort_keys=True, default=str),
                    "severity": severity,
                    "blocking": severity == "critical",
                    "success": bool(res.success),
                    "element_count": detail.get("element_count"),
                    "unexpected_count": detail.get("unexpected_count"),
                    "unexpected_ids": sorted(dict.fromkeys(ids)),
                    "observed_value": None
                    if observed is None
                    else json.dumps(observed, default=str),
                }
            )
        return rows

    def build_docs(self) -> Path | None:
        """Rebuild the HTML Data Docs over the latest runs; returns the index page."""
        self.prune_results()
        self.context.build_data_docs()
        for site in self.context.get_docs_sites_urls():
            url = site.get("site_url") or ""
            if url.startswith("file://"):
                return Path(url.removeprefix("file://"))
        return None

    def prune_results(self, keep: int = KEEP_RESULTS) -> int:
        """Drop all but each suite's `keep` latest stored results, so that building the
        Data Docs does not slow down run after run (dq_results keeps every outcome)."""
        root = Path(self.context.root_directory) / "uncommitted" / "validations"
        removed = 0
        for suite in (p for p in root.glob("*") if p.is_dir()):
            # <run name>/<run time>: run names are run ids, so the time orders them.
            runs = sorted((p for p in suite.glob("*/*") if p.is_dir()), key=lambda p: p.name)
            for old in runs[:-keep] if keep else runs:
                shutil.rmtree(old)
                if not any(old.parent.iterdir()):
                    old.parent.rmdir()
                removed += 1
        return removed


def _merge_batches(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per expectation across batches: all must pass, counts add up."""
    if rows.height == 0:
        return rows
    merged = rows.group_by(
        "run_id",
        "suite",
        "expectation",
        "column_name",
        "kwargs",
        "severity",
        "blocking",
        maintain_order=True,
    ).agg(
        success=pl.col("success").all(),
        # Table-level checks count no rows: their counts stay null, not 0.
        element_count=_sum_or_null("element_count"),
        unexpected_count=_sum_or_null("unexpected_count"),
        unexpected_ids=pl.col("unexpected_ids")
        .list.explode(keep_nulls=False, empty_as_null=False)
        .unique(maintain_order=True)
        .head(SAMPLE_IDS),
        observed_value=pl.col("observed_value").last(),
    )
    return merged.select(list(DQ_SCHEMA))


def _sum_or_null(column: str) -> pl.Expr:
    return pl.when(pl.col(column).is_not_null().any()).then(pl.col(column).sum())


def blocking_failures(results: pl.DataFrame) -> pl.DataFrame:
    """The failed blocking expectations among `results`."""
    return results.filter(pl.col("blocking") & ~pl.col("success"))


@dataclass(frozen=True)
class Outcome:
    """A run's data-quality outcome and its failed expectations, one line each."""

    text: str  # passed | passed with warnings | failed
    failures: tuple[str, ...] = ()  # blocking expectations that failed
    warnings: tuple[str, ...] = ()  # warning expectations that failed


def outcome(results: pl.DataFrame) -> Outcome:
    """The outcome of a run's dq_results rows, lines in a fixed order (suite, expectation)."""
    failed = results.filter(~pl.col("success")).sort(
        "suite", "expectation", "column_name", "kwargs", nulls_last=True, maintain_order=True
    )
    failures = tuple(describe_failure(r) for r in failed.filter("blocking").iter_rows(named=True))
    warned = tuple(
        describe_failure(r) for r in failed.filter(~pl.col("blocking")).iter_rows(named=True)
    )
    text = "failed" if failures else "passed with warnings" if warned else "passed"
    return Outcome(text, failures, warned)


def outcome_lines(
    text: str, failures: Sequence[str] = (), warned: Sequence[str] = ()
) -> list[tuple[str, str]]:
    """A run's data-quality lines as (label, text): what `paperlake run` prints after a run
    and what the data-quality page shows, in the same words."""
    return [
        ("data quality", text),
        *(("data-quality failure", line) for line in failures),
        *(("data-quality warning", line) for line in warned),
    ]


def severity_meta(severity: str) -> dict:
    """An expectation's meta: its paperlake severity and whether a failure blocks the publish."""
    return {"paperlake": {"severity": severity, "blocks_publish": severity == "critical"}}


def severity_note(severity: str) -> str:
    """An expectation's note, shown on its suite's Data Docs page."""
    if severity == "critical":
        return "paperlake severity: critical. A failure blocks the publish."
    return f"paperlake severity: {severity}. A failure is reported; the run still publishes."
