"""Commands that read raw files: run (a new version), validate (a check only) and serve
(runs on a schedule); and the summary a run prints."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from flows.cli.options import FormatOpt, MaxRowsOpt, setting_options
from flows.cli.output import MAX_ROWS, Format, err, fail, out, print_frame
from flows.core.errors import WarehouseError
from flows.core.settings import Settings
from flows.core.stopping import stops_on_signals, stops_within


def flow_parameters(settings: Settings) -> dict[str, Any]:
    """The flow's parameters for `settings`: the warehouse, and every setting given (an
    option, the environment, a settings file) or differing from its default: the flow, in
    this process, takes the others too, and tells a model given from the default one."""
    defaults = Settings()
    given = {
        name: getattr(settings, name)
        for name in Settings.model_fields
        if name in settings.model_fields_set or getattr(settings, name) != getattr(defaults, name)
    }
    given["warehouse"] = str(settings.warehouse)
    if "raw" in given:
        given["raw"] = [str(p) for p in settings.raw]
    return given


def print_up_to_date(version: int) -> None:
    out.print(f"up to date at version {version}: inputs and config unchanged")
    out.print("embeddings computed: 0")


@stops_on_signals
@setting_options()
def run(
    force: Annotated[
        bool, typer.Option("--force", help="Build a version even if nothing changed.")
    ] = False,
    *,
    settings: Settings,
) -> None:
    """Ingest, validate, embed, aggregate and publish a new version."""
    missing = [str(p) for p in settings.raw if not Path(p).exists()]
    if missing:
        fail(f"raw input {', '.join(missing)} does not exist")
    for folder in folders_written(settings):
        if folder.exists() and not folder.is_dir():
            fail(f"{folder} is a file: give a folder (or a path that does not exist yet)")
    if hand_over_run(settings, force):
        return
    from flows.publish import up_to_date  # numpy and polars: not for a handed-over run

    # Checked before any flow run starts: a run with nothing to do costs only file hashing.
    if not (force or settings.refit_topics):
        try:
            current = up_to_date(settings)
        except (FileNotFoundError, WarehouseError) as exc:
            fail(str(exc))
        if current is not None:
            print_up_to_date(current)
            return

    import duckdb

    from flows.core import run_record as record
    from flows.core.damage import reason_of, told
    from flows.serve import ServerError, run_api
    from flows.validate import DataQualityError

    parameters = flow_parameters(settings) | ({"force": True} if force else {})
    try:
        started = time.perf_counter()

        def load_stages() -> None:
            # The stages' imports, the model and Great Expectations, while the server of
            # a new warehouse starts; the rest of `pipeline.warm_up` would lengthen the
            # start-up by more than it saves later.
            from flows import embed, pipeline, validate  # noqa: F401

            embed.load_model(settings.model, settings.device, settings.precision)
            validate.warm_up()

        # Start-up: the Prefect API, and the stages' imports and the model, side by side.
        with run_api(settings, while_starting=load_stages):
            from flows.pipeline import run_here

            startup = record.startup_figures(started)
            summary = run_here(settings, parameters)
        record.started_up(summary, *startup)
    except DataQualityError as exc:
        stopped_before_publish(settings, str(exc))
    except (FileNotFoundError, ValueError, WarehouseError, ServerError) as exc:
        fail(str(exc))
    except OSError as exc:  # disk full, permissions: the previous version stays current
        fail(f"{exc.strerror or exc}: {exc.filename or ''}; the previous version stays current")
    except duckdb.IOException as exc:  # a data file gone, the catalog's disk full
        fail(str(told(exc) or f"{reason_of(exc)}; the previous version stays current"))
    print_summary(summary)


def stopped_before_publish(settings: Settings, failures: str) -> None:
    err.print(f"[red]run stopped before publish:[/red] {escape(failures)}")
    err.print(f"The previous version stays current. Details: {settings.dq_path}")
    raise typer.Exit(1)


def handed_parameters(settings: Settings, force: bool) -> dict[str, Any]:
    """Every setting of the run as a flow parameter, paths absolute (the serving process
    has its own working folder and environment), but the model where it was left to its
    default: the run then stops, as here, if the warehouse's model is another."""
    given = settings.to_dict() | {"force": force}
    if not settings.model_given:
        del given["model"]
    return absolute_paths(given)


def absolute_paths(parameters: dict[str, Any]) -> dict[str, Any]:
    """Flow parameters with their paths absolute (raw, warehouse, a local data path or
    model folder), for a run that starts in another folder."""
    found = dict(parameters)
    found["raw"] = [str(Path(p).resolve()) for p in found["raw"]]
    found["warehouse"] = str(Path(found["warehouse"]).resolve())
    for key in ("data_path", "model"):
        if found.get(key) and "://" not in found[key] and Path(found[key]).exists():
            found[key] = str(Path(found[key]).resolve())
    return found


def hand_over_run(settings: Settings, force: bool) -> bool:
    """Run in the warm runner of a `paperlake serve` of this warehouse, if one answers
    (flows/serve/warm_runner.py): its process has the stages imported and the model loaded."""
    from types import SimpleNamespace

    from flows.serve import HandedOverError, hand_over

    def say(line: str) -> None:
        err.print(line, markup=False, highlight=False, soft_wrap=True)

    try:
        summary = hand_over(settings, handed_parameters(settings, force), say)
    except HandedOverError as exc:
        if exc.kind == "data-quality":
            stopped_before_publish(settings, str(exc))
        fail(str(exc))
    if summary is None:
        return False
    out.print(f"run handed to paperlake serve on {settings.warehouse}", highlight=False)
    print_summary(SimpleNamespace(**summary))
    return True


def folders_written(settings: Settings) -> list[Path]:
    """The folders a run writes: the warehouse, and a local data path given apart from it."""
    folders = [settings.warehouse]
    if settings.data_path and "://" not in settings.data_path:
        folders.append(Path(settings.data_path))
    return folders


@setting_options("min_words", "max_words", "max_reject_share")
def validate_raw(
    paths: Annotated[list[Path], typer.Argument(help="Raw files or folders (read recursively).")],
    fmt: FormatOpt = Format.table,
    max_rows: MaxRowsOpt = MAX_ROWS,
    *,
    settings: Settings,
) -> None:
    """Check raw files without publishing: per file, records seen, accepted, rejected, flags;
    then every rejected record: file:line, rule, reason and its first characters."""
    from flows import ingest

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        fail(f"raw input {', '.join(missing)} does not exist")
    with ingest.reading_progress() as advance:
        result = ingest.ingest(
            paths, min_words=settings.min_words, max_words=settings.max_words, progress=advance
        )
    report = ingest.file_report(result.sources)
    if fmt != Format.table:
        print_frame(report, fmt)
        return
    # Warnings are long; they follow the table, one line each.
    table = report.drop("warning").rename({"rejected_by_rule": "rejected by rule"})
    print_frame(table, fmt, max_rows, title="raw files")
    sources = result.sources
    out.print(
        f"files: {sources.height}  records seen: {sources['records_seen'].sum()}  "
        f"accepted: {sources['accepted'].sum()}  rejected: {sources['rejected'].sum()}"
    )
    for row in sources.iter_rows(named=True):
        share = row["rejected"] / row["records_seen"] if row["records_seen"] else 0.0
        if share > settings.max_reject_share:
            out.print(
                f"[yellow]warning:[/yellow] {row['path']} rejects {share:.0%} of its records "
                f"(more than {settings.max_reject_share:.0%})"
            )
        if row["error"]:
            out.print(f"[yellow]skipped file:[/yellow] {escape(row['error'])}")
        if row["warning"]:
            out.print(f"[yellow]warning:[/yellow] {escape(row['path'] + ': ' + row['warning'])}")
    print_rejects(result.rejects, sources["path"].to_list(), max_rows)


def print_rejects(rejects, paths: list[str], max_rows: int) -> None:
    """The rejected records as a table, by file and then rule: where each was read (relative
    to the files' common folder), the rule, the reason and its first characters."""
    import polars as pl

    from flows.core.wording import common_root, location, snippet

    if rejects.height == 0:
        return
    root = common_root(paths)
    rows = rejects.sort("source_path", "rule", "record_no").to_dicts()
    table = pl.DataFrame(
        {
            "found at": [location(r["source_path"], root, r["line"], r["record_no"]) for r in rows],
            "rule": [r["rule"] for r in rows],
            "reason": [r["reason"] for r in rows],
            "first characters": [snippet(r["raw_snippet"]) for r in rows],
        },
        schema={c: pl.String for c in ("found at", "rule", "reason", "first characters")},
    )
    where = f" (paths relative to {root})" if root else ""
    print_frame(table, Format.table, max_rows, title=f"rejected records{where}", by_importance=True)


def print_summary(summary) -> None:
    """The end-of-run report: counts, version, data quality, seconds per stage."""
    from flows.core.wording import outcome_lines, page_lines, usage_lines

    if summary.status == "up to date":
        print_up_to_date(summary.version)
        return
    # The data-quality lines are worded once, for this summary and the data-quality page.
    (label, outcome), *quality = outcome_lines(
        summary.dq_outcome, summary.dq_failures, summary.dq_warnings
    )
    lines = [
        f"[bold]version {summary.version}[/bold] of {summary.warehouse} published "
        f"(run {summary.run_id[:8]}, flow run {summary.flow_run}"
        + (f", {summary.flow_run_url}" if summary.flow_run_url else "")
        + ")",
        f"files: {summary.files}  records seen: {summary.records_seen}  "
        f"accepted: {summary.accepted}  rejected: {summary.rejected}"
        + (
            "  (" + ", ".join(f"{k}: {v}" for k, v in summary.rejects_by_rule.items()) + ")"
            if summary.rejects_by_rule
            else ""
        ),
        f"papers: {summary.papers}  duplicate records merged: {summary.duplicate_records}  "
        f"near-duplicate pairs: {summary.near_duplicate_pairs}  topics: {summary.topics}",
        f"embeddings computed: {summary.embedded}  reused: {summary.embeddings_reused}  "
        f"files parsed: {summary.files_parsed} of {summary.files}",
        f"{label}: {escape(outcome)}",
        "seconds: " + "  ".join(f"{k} {v:.1f}" for k, v in summary.stage_seconds.items()),
        *usage_lines(summary),
    ]
    for error in summary.file_errors:
        lines.append(f"[yellow]skipped file:[/yellow] {escape(error)}")
    for warning in [*summary.file_warnings, *getattr(summary, "warnings", [])]:
        lines.append(f"[yellow]warning:[/yellow] {escape(warning)}")
    for label, text in quality:
        color = "red" if "failure" in label else "yellow"
        lines.append(f"[{color}]{label}:[/{color}] {escape(text)}")
    lines += [
        escape(line) for line in page_lines(getattr(summary, "dq_page", None), summary.data_docs)
    ]
    for line in lines:
        out.print(line)


def schedule_text(cron: str | None, interval: int | None) -> str:
    """The schedule `serve` runs on, with its next three runs dated (UTC)."""
    from flows.serve import next_run_times

    if not (cron or interval):
        return "no schedule: runs from the UI and from paperlake run"
    when = ", ".join(t.strftime("%Y-%m-%d %H:%M:%S") for t in next_run_times(cron, interval))
    every = f"cron {cron!r}" if cron else f"every {interval} s"
    return f"{every}; next runs at about {when} UTC"


@stops_within("the schedule and the Prefect server it started")
@setting_options()
def serve(
    cron: Annotated[
        str | None, typer.Option(help="Cron schedule, e.g. '0 6 * * *' (06:00 UTC daily).")
    ] = None,
    interval: Annotated[
        int | None, typer.Option(help="Or: run every this many seconds.", min=1)
    ] = None,
    name: Annotated[str, typer.Option(help="Deployment name.")] = "scheduled",
    port: Annotated[int, typer.Option(help="Port of the Prefect server and its UI.")] = 4200,
    *,
    settings: Settings,
) -> None:
    """Run the flow on a schedule, served from this process, with the Prefect UI; and run
    `paperlake run` of this warehouse here, warm.

    Without PREFECT_API_URL this starts a Prefect server (UI at http://127.0.0.1:PORT,
    its database in the warehouse folder) and stops it on Ctrl-C or SIGTERM; with
    PREFECT_API_URL set it serves against that server and starts none. Without a schedule
    it serves the deployment for runs started from the UI and from `paperlake run`. Its
    runs take every setting `run` takes, as given here. While
    it serves, `paperlake run` on the same warehouse hands its run to this process, which
    has the stages imported and the model loaded: a small run takes a second or two.
    """
    from prefect.settings import PREFECT_API_URL

    from flows.serve import ServerError, persistent_api, port_in_use

    if cron is not None and interval is not None:
        fail("give one schedule: --cron '0 6 * * *' or --interval SECONDS, not both")
    parameters = served_parameters(settings)
    started_here = not PREFECT_API_URL.value()
    if started_here and port_in_use(port):
        fail(f"port {port} is in use; choose another with --port")
    # SIGTERM stops serve as Ctrl-C does, whenever it comes: Prefect's runner handles it
    # once started, and until then (the model loading, the deployment registering) it
    # raises KeyboardInterrupt here, so the runner address and the server go as well.
    before = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        with persistent_api(settings, port) as (api_url, ui_url):
            out.print(f"Prefect API: {api_url}", highlight=False)
            if ui_url:
                out.print(f"Prefect UI: {ui_url}  (runs, logs and artifacts)", highlight=False)
            serve_here(settings, parameters, name, cron, interval, started_here)
    except ServerError as exc:
        fail(str(exc))
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM before Prefect's runner took over
        pass
    finally:
        signal.signal(signal.SIGTERM, before)
    out.print("stopped: the schedule and the Prefect server it started")


def served_parameters(settings: Settings) -> dict[str, Any]:
    """The flow parameters of the served deployment: raw, warehouse and every setting given
    (an option, the environment, a settings file), paths absolute (a scheduled run starts
    in another folder)."""
    given = {name: getattr(settings, name) for name in settings.model_fields_set}
    parameters = absolute_paths(
        given | {"raw": [str(p) for p in settings.raw], "warehouse": str(settings.warehouse)}
    )
    missing = [p for p in parameters["raw"] if not Path(p).exists()]
    if missing:
        fail(f"raw input {', '.join(missing)} does not exist")
    return parameters


def serve_here(
    settings: Settings,
    parameters: dict[str, Any],
    name: str,
    cron: str | None,
    interval: int | None,
    started_here: bool,
) -> None:
    """Warm up, then serve the deployment and the warm runner until stopped."""
    from prefect import serve as serve_deployments
    from prefect.context import SyncClientContext

    from flows.pipeline import flow_for, run_handed_over, warm_up
    from flows.serve import WarmRunner

    deployment = flow_for(settings).to_deployment(
        name=name, cron=cron, interval=interval, parameters=parameters
    )
    # What a handed-over run would otherwise import and load, done once.
    warm_up(settings)
    # Handed-over runs share one Prefect client of the serve's API, made here: a client
    # made per run builds an SSL context though the API is on loopback.
    with SyncClientContext(), WarmRunner(settings.warehouse, run_handed_over):
        out.print(
            f"serving paperlake/{name} ({schedule_text(cron, interval)}); paperlake run on "
            f"{settings.warehouse} runs here; Ctrl-C or SIGTERM stops it",
            highlight=False,
        )
        # One run at a time: a run that would start while another holds the warehouse
        # waits for it instead. A server started here stops with serve: pausing its
        # schedule first only keeps the shutdown waiting on the API.
        serve_deployments(
            deployment, print_starting_message=False, limit=1, pause_on_shutdown=not started_here
        )
