"""Validate: run the Great Expectations suites in expectations/ against staged tables.

Suites are JSON files, one per table. Severity `critical` marks a blocking check: a
failure stops the publish. Results become dq_results rows and HTML Data Docs.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from flows.settings import EXPECTATIONS_DIR

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

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
    """A suite file from expectations/."""

    name: str
    id_columns: tuple[str, ...]
    expectations: tuple[dict, ...]

    @classmethod
    def load(cls, name: str, folder: Path = EXPECTATIONS_DIR) -> Suite:
        path = folder / f"{name}.json"
        spec = json.loads(path.read_text())
        return cls(
            name=spec["name"],
            id_columns=tuple(spec.get("meta", {}).get("id_columns", [])),
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
            "dim",
            nan_count=pl.col("embedding").list.eval(pl.element().is_nan()).list.sum(),
            norm=pl.col("embedding").list.eval(pl.element().pow(2)).list.sum().sqrt(),
        )
    return frame.select(pl.exclude(pl.List(pl.Utf8), pl.List(pl.Float32)))


def _quiet_gx() -> None:
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
                type=e["type"], kwargs=e["kwargs"], severity=e.get("severity", "critical")
            ).to_domain_obj()
            for e in suite.expectations
        ]
        gx_suite = self.context.suites.add_or_update(
            gx.ExpectationSuite(name=suite.name, expectations=expectations)
        )
        # A validation definition stores its results for the Data Docs, which build_docs
        # renders once per run; a checkpoint per table would rebuild them every time.
        return self.context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=suite.name, data=batch, suite=gx_suite)
        )

    def validate(self, table: str, frame: pl.DataFrame, parameters: dict) -> pl.DataFrame:
        """Run the suite named `table` on `frame` (in batches); return its dq_results rows."""
        suite = Suite.load(table)
        definition = self._definition(suite)
        prepared = prepare(table, frame)
        batches = [prepared] if prepared.height <= BATCH_ROWS else prepared.iter_slices(BATCH_ROWS)
        result_format = {
            "result_format": "COMPLETE",
            "unexpected_index_column_names": list(suite.id_columns),
            "partial_unexpected_count": SAMPLE_IDS,
        }
        rows: list[dict] = []
        for batch in batches:
            result = definition.run(
                batch_parameters={"dataframe": batch.to_pandas()},
                expectation_parameters=parameters,
                result_format=result_format,
            )
            rows.extend(self._rows(suite, result.results))
        out = _merge_batches(pl.DataFrame(rows, schema=DQ_SCHEMA))
        self.results.append(out)
        return out

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
            runs = sorted(p for p in suite.glob("*/*") if p.is_dir())
            for old in runs[:-keep] if keep else runs:
                shutil.rmtree(old)
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
        element_count=pl.col("element_count").sum(),
        unexpected_count=pl.col("unexpected_count").sum(),
        unexpected_ids=pl.col("unexpected_ids")
        .list.explode(keep_nulls=False, empty_as_null=False)
        .unique(maintain_order=True)
        .head(SAMPLE_IDS),
        observed_value=pl.col("observed_value").last(),
    )
    return merged.select(list(DQ_SCHEMA))


def blocking_failures(results: pl.DataFrame) -> pl.DataFrame:
    """The failed blocking expectations among `results`."""
    return results.filter(pl.col("blocking") & ~pl.col("success"))


FILE_REPORT = """<!doctype html>
<html><head><meta charset="utf-8"><title>paperlake: raw files of run {{ run_id }}</title>
<style>
body { font-family: sans-serif; margin: 2em; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 4px 8px; }
td.n { text-align: right; } tr.warn { background: #fff3cd; } tr.error { background: #f8d7da; }
</style></head><body>
<h1>Raw files of run {{ run_id }}</h1>
<p>Every record seen is either accepted or rejected. Rows in yellow reject more than
{{ "%.0f" % (max_reject_share * 100) }}% of their records; rows in red could not be read.
<a href="index.html">Expectation results (Data Docs)</a></p>
<table><tr><th>file</th><th>format</th><th>seen</th><th>accepted</th><th>rejected</th>
<th>rejected by rule</th><th>flags</th><th>error</th></tr>
{% for r in rows %}<tr class="{{ r.css }}"><td>{{ r.path }}</td><td>{{ r.format or "" }}</td>
<td class="n">{{ r.seen }}</td><td class="n">{{ r.accepted }}</td>
<td class="n">{{ r.rejected }}</td>
<td>{{ r.rejected_by_rule }}</td><td>{{ r.flags }}</td><td>{{ r.error or "" }}</td></tr>
{% endfor %}</table></body></html>
"""


def write_file_report(
    report: pl.DataFrame, folder: Path, run_id: str, max_reject_share: float
) -> Path:
    """The per-file ingest report (ingest.file_report) as files.html beside the Data Docs.

    The Data Docs index, rebuilt by every run, gets a link to it at the top.
    """
    import jinja2

    rows = []
    for row in report.iter_rows(named=True):
        share = row["rejected"] / row["seen"] if row["seen"] else 0.0
        css = "error" if row["error"] else "warn" if share > max_reject_share else ""
        rows.append(row | {"css": css})
    html = jinja2.Environment(autoescape=True).from_string(FILE_REPORT)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "files.html"
    path.write_text(html.render(rows=rows, run_id=run_id, max_reject_share=max_reject_share))
    index = folder / "index.html"
    if index.exists() and 'href="files.html"' not in (text := index.read_text()):
        link = '<p style="margin:1em"><a href="files.html">Raw files of the latest run</a></p>'
        index.write_text(text.replace("<body>", "<body>" + link, 1))
    return path
