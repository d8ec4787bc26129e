"""The paperlake command line: run, validate, search, versions, query."""

from __future__ import annotations

import json
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated

from flows.settings import Settings, configure_environment, default_warehouse

configure_environment()

import polars as pl  # noqa: E402
import typer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402

from flows.lake import WarehouseError, open_lake, read_sql  # noqa: E402
from flows.stopping import stops_on_signals  # noqa: E402

app = typer.Typer(
    help="Raw dumps of paper abstracts into a versioned, quality-checked DuckLake warehouse.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
out = Console(soft_wrap=True)
err = Console(stderr=True)

WarehouseOpt = Annotated[
    Path, typer.Option("--warehouse", "-w", help="Warehouse folder.", show_default=False)
]
VersionOpt = Annotated[
    int | None, typer.Option("--version", "-v", help="Read this version (default: latest).")
]


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def settings_for(warehouse: Path | None, **changes) -> Settings:
    return Settings(warehouse=warehouse or default_warehouse(), **changes)


def print_frame(frame: pl.DataFrame, fmt: Format, title: str | None = None) -> None:
    """Print a result as a rich table, CSV or a JSON list of objects."""
    if fmt == Format.json:
        sys.stdout.write(json.dumps(frame.to_dicts(), indent=2, default=str) + "\n")
        return
    if fmt == Format.csv:
        flat = frame.with_columns(
            pl.Series(c, [json.dumps(v, default=str) for v in frame[c].to_list()])
            for c, dtype in frame.schema.items()
            if dtype.is_nested()
        )
        sys.stdout.write(flat.write_csv())
        return
    table = Table(title=title, show_lines=False)
    for column in frame.columns:
        table.add_column(column, overflow="fold")
    for row in frame.iter_rows():
        table.add_row(*("" if v is None else str(v) for v in row))
    out.print(table)


def fail(message: str, code: int = 1) -> None:
    err.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)


@app.command()
@stops_on_signals
def run(
    raw: Annotated[
        list[Path] | None,
        typer.Option("--raw", "-r", help="Raw file or folder (read recursively); repeatable."),
    ] = None,
    warehouse: WarehouseOpt = None,
    model: Annotated[
        str | None, typer.Option(help="Packaged all-MiniLM-L6-v2 or a local model folder.")
    ] = None,
    batch_size: Annotated[int | None, typer.Option(help="Embedding batch size.")] = None,
    precision: Annotated[str | None, typer.Option(help="auto, bf16 or fp32.")] = None,
    topics: Annotated[
        int | None, typer.Option(help="Number of topics (default: from data).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Build a version even if nothing changed.")
    ] = False,
) -> None:
    """Ingest, validate, embed, aggregate and publish a new version."""
    from flows.publish import up_to_date

    settings = settings_for(warehouse)
    overrides = {"raw": tuple(raw)} if raw else {}
    overrides |= {
        k: v
        for k, v in (
            ("model", model),
            ("batch_size", batch_size),
            ("precision", precision),
            ("n_topics", topics),
        )
        if v is not None
    }
    missing = [str(p) for p in overrides.get("raw", settings.raw) if not Path(p).exists()]
    if missing:
        fail(f"raw input {', '.join(missing)} does not exist")
    # Checked before any flow run starts: a run with nothing to do costs only file hashing.
    if not force:
        try:
            current = up_to_date(settings.with_(**overrides))
        except (FileNotFoundError, WarehouseError) as exc:
            fail(str(exc))
        if current is not None:
            out.print(f"up to date at version {current}: inputs and config unchanged")
            out.print("embeddings computed: 0")
            return

    from flows import embed
    from flows.pipeline import paperlake
    from flows.prefect_server import ServerError, run_api
    from flows.validate import DataQualityError

    params = {
        "raw": [str(p) for p in raw] if raw else None,
        "warehouse": str(settings.warehouse),
        "model": model,
        "batch_size": batch_size,
        "precision": precision,
        "n_topics": topics,
        "force": force or None,
    }
    chosen = settings.with_(**overrides)
    try:
        started = time.perf_counter()

        def load_model() -> None:
            embed.load_model(chosen.model, chosen.device, chosen.precision)

        # Start-up: the Prefect API and the model, side by side.
        with run_api(chosen, while_starting=load_model):
            startup = round(time.perf_counter() - started, 3)
            summary = paperlake(**{k: v for k, v in params.items() if v is not None})
        summary.stage_seconds = {"startup": startup, **summary.stage_seconds}
    except DataQualityError as exc:
        err.print(f"[red]run stopped before publish:[/red] {exc}")
        err.print("The previous version stays current. Details: " + str(settings.dq_path))
        raise typer.Exit(1) from None
    except (FileNotFoundError, ValueError, WarehouseError, ServerError) as exc:
        fail(str(exc))
    print_summary(summary)


@app.command(name="validate")
def validate_raw(
    paths: Annotated[list[Path], typer.Argument(help="Raw files or folders (read recursively).")],
    min_words: Annotated[
        int | None, typer.Option(help="Fewest words of an untitled abstract.")
    ] = None,
    max_words: Annotated[int | None, typer.Option(help="Most words of an abstract.")] = None,
    fmt: Annotated[Format, typer.Option("--format", help="table, csv or json.")] = Format.table,
) -> None:
    """Check raw files without publishing: per file, records seen, accepted, rejected, flags."""
    from flows import ingest

    settings = Settings()
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        fail(f"raw input {', '.join(missing)} does not exist")
    with ingest.reading_progress() as advance:
        result = ingest.ingest(
            paths,
            min_words=min_words or settings.min_words,
            max_words=max_words or settings.max_words,
            progress=advance,
        )
    report = ingest.file_report(result.sources)
    if fmt != Format.table:
        print_frame(report, fmt)
        return
    # Warnings are long; they follow the table, one line each.
    table = report.drop("warning").rename({"rejected_by_rule": "rejected by rule"})
    print_frame(table, fmt, title="raw files")
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


def print_summary(summary) -> None:
    """The end-of-run report: counts, version, data quality, seconds per stage."""
    from flows.validate import outcome_lines

    if summary.status == "up to date":
        out.print(f"up to date at version {summary.version}: inputs and config unchanged")
        out.print("embeddings computed: 0")
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
    ]
    for error in summary.file_errors:
        lines.append(f"[yellow]skipped file:[/yellow] {escape(error)}")
    for warning in summary.file_warnings:
        lines.append(f"[yellow]warning:[/yellow] {escape(warning)}")
    for label, text in quality:
        color = "red" if "failure" in label else "yellow"
        lines.append(f"[{color}]{label}:[/{color}] {escape(text)}")
    if summary.data_docs:
        lines.append(f"data docs: {summary.data_docs}")
    if getattr(summary, "dq_page", None):
        lines.append(f"data-quality page: {summary.dq_page}")
    for line in lines:
        out.print(line)


class Mode(StrEnum):
    hybrid = "hybrid"
    dense = "dense"
    keyword = "keyword"


def print_hits(hits: pl.DataFrame, fmt: Format) -> None:
    if fmt == Format.table:
        hits = hits.with_columns(pl.col("abstract").str.slice(0, 160) + "…")
    print_frame(hits, fmt)


@app.command()
def search(
    text: Annotated[str, typer.Argument(help="What to look for, in words.")],
    k: Annotated[int, typer.Option("-k", help="Number of hits.")] = 10,
    mode: Annotated[
        Mode, typer.Option(help="hybrid (BM25 + dense), dense or keyword.")
    ] = Mode.hybrid,
    venue: Annotated[str | None, typer.Option(help="Only papers of this venue.")] = None,
    year: Annotated[int | None, typer.Option(help="Only papers of this year.")] = None,
    fusion: Annotated[
        str, typer.Option(help="How hybrid mode fuses: score (scaled scores) or rrf.")
    ] = "score",
    fmt: Annotated[Format, typer.Option("--format", help="table or json.")] = Format.table,
    warehouse: WarehouseOpt = None,
    version: VersionOpt = None,
    model: Annotated[str | None, typer.Option(help="Local model folder for queries.")] = None,
) -> None:
    """Search the papers of a version by meaning and by words."""
    from flows.search import search as run_search

    settings = settings_for(warehouse, **({"model": model} if model else {}))
    try:
        with open_lake(settings, version) as con:
            hits = run_search(
                con, text, settings, k=k, mode=mode.value, venue=venue, year=year, fusion=fusion
            )
    except (WarehouseError, ValueError) as exc:
        fail(str(exc))
    print_hits(hits, fmt)


@app.command()
def similar(
    paper_id: Annotated[str, typer.Argument(help="A paper id of the version.")],
    k: Annotated[int, typer.Option("-k", help="Number of hits.")] = 10,
    fmt: Annotated[Format, typer.Option("--format", help="table or json.")] = Format.table,
    warehouse: WarehouseOpt = None,
    version: VersionOpt = None,
) -> None:
    """The papers closest in meaning to a given paper."""
    from flows.search import similar as run_similar

    try:
        with open_lake(settings_for(warehouse), version) as con:
            hits = run_similar(con, paper_id, k)
    except (WarehouseError, ValueError) as exc:
        fail(str(exc))
    print_hits(hits, fmt)


@app.command()
def versions(
    warehouse: WarehouseOpt = None,
    fmt: Annotated[Format, typer.Option("--format", help="table, csv or json.")] = Format.table,
) -> None:
    """One line per published version: version, time, summary."""
    settings = settings_for(warehouse)
    try:
        with open_lake(settings) as con:
            frame = con.execute(read_sql("catalog/versions")).pl()
    except WarehouseError as exc:
        fail(str(exc))
    print_frame(frame, fmt)


@app.command()
def query(
    sql: Annotated[str | None, typer.Argument(help="SQL over the version's tables.")] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Read the SQL from this file.")
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", help="table, csv or json.")] = Format.table,
    warehouse: WarehouseOpt = None,
    version: VersionOpt = None,
) -> None:
    """Run SQL with a version's tables in scope (papers, embeddings, topics, ...)."""
    import duckdb

    if (sql is None) == (file is None):
        fail("give the SQL as an argument or with --file, not both")
    if file is not None:
        if not file.is_file():
            fail(f"no SQL file {file}")
        sql = file.read_text()
    settings = settings_for(warehouse)
    try:
        with open_lake(settings, version) as con:
            frame = con.execute(sql).pl()
    except WarehouseError as exc:
        fail(str(exc))
    except duckdb.Error as exc:
        fail(f"query failed: {exc}")
    print_frame(frame, fmt)


@app.command()
def diff(
    version_a: Annotated[int, typer.Argument(help="Older version.")],
    version_b: Annotated[int, typer.Argument(help="Newer version.")],
    warehouse: WarehouseOpt = None,
    fmt: Annotated[Format, typer.Option("--format", help="table or json.")] = Format.table,
) -> None:
    """What changed between two versions: papers, venues, topics, near-duplicates."""
    from flows import history

    try:
        change = history.diff(settings_for(warehouse), version_a, version_b)
    except WarehouseError as exc:
        fail(str(exc))
    counts = change.counts()
    if fmt == Format.json:
        payload = {
            "version_a": version_a,
            "version_b": version_b,
            **counts,
            "papers": change.papers.to_dicts(),
            "groups": change.groups.to_dicts(),
            "new_duplicates": change.new_duplicates.to_dicts(),
        }
        sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
        return
    out.print(
        f"version {version_a} -> {version_b}: papers +{counts['added']} added, "
        f"-{counts['removed']} removed, ~{counts['changed']} changed"
    )
    if change.papers.height:
        print_frame(change.papers, Format.table, title="papers")
    print_frame(change.groups, Format.table, title="papers per venue and topic")
    out.print(f"new near-duplicate pairs: {change.new_duplicates.height}")
    if change.new_duplicates.height:
        print_frame(change.new_duplicates, Format.table)


@app.command()
def checksum(
    warehouse: WarehouseOpt = None,
    version: VersionOpt = None,
    fmt: Annotated[Format, typer.Option("--format", help="table or json.")] = Format.table,
) -> None:
    """Order-independent content checksums of a version: per table and for the whole."""
    from flows import history

    try:
        number, tables, whole = history.checksums(settings_for(warehouse), version)
    except WarehouseError as exc:
        fail(str(exc))
    frame = pl.DataFrame({"table": [*tables, "(version)"], "checksum": [*tables.values(), whole]})
    if fmt == Format.table:
        out.print(f"version {number}")
    print_frame(frame, fmt)


@app.command()
def report(
    warehouse: WarehouseOpt = None,
    version: VersionOpt = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="HTML file (default: warehouse/report-v<N>.html)."),
    ] = None,
) -> None:
    """Write a self-contained HTML report of a version: topics, venues, quality, changes."""
    from flows.report import write_report

    try:
        path = write_report(settings_for(warehouse), version, output)
    except WarehouseError as exc:
        fail(str(exc))
    out.print(str(path), highlight=False)


class PageFormat(StrEnum):
    html = "html"
    json = "json"


DQ_HELP = (
    "Data quality of a published version (default: the latest) as one offline HTML page, "
    "or --format json. It shows the run's outcome in the words `run` printed; every suite "
    "and expectation with its severity (blocking or warning), outcome, observed value "
    "against its threshold and failing rows (title, file:line, offending value); each raw "
    "file's records seen, accepted, rejected by rule, flags and warning; and a trend over "
    "recent versions. Every run writes the page of the version it publishes "
    "(warehouse/dq-v<N>.html); a run stopped by a blocking check writes "
    "warehouse/dq/<run_id>.html instead."
)


@app.command(name="dq", help=DQ_HELP)
def data_quality(
    warehouse: WarehouseOpt = None,
    version: VersionOpt = None,
    fmt: Annotated[
        PageFormat, typer.Option("--format", help="html (a page; prints its path) or json.")
    ] = PageFormat.html,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="HTML file (default: warehouse/dq-v<N>.html)."),
    ] = None,
) -> None:
    """Write the data-quality page of a version (see DQ_HELP); print its path."""
    from flows import dq

    settings = settings_for(warehouse)
    try:
        if fmt == PageFormat.json:
            page = dq.build(settings, version)
            dq.link_data_docs(page, settings)
            sys.stdout.write(json.dumps(dq.as_json(page), indent=2, default=str) + "\n")
            return
        path = dq.write_page(settings, version, output)
    except WarehouseError as exc:
        fail(str(exc))
    out.print(str(path), highlight=False)


@app.command()
def serve(
    cron: Annotated[
        str | None, typer.Option(help="Cron schedule, e.g. '0 6 * * *' (06:00 UTC daily).")
    ] = None,
    interval: Annotated[
        int | None, typer.Option(help="Or: run every this many seconds.", min=1)
    ] = None,
    raw: Annotated[
        list[Path] | None, typer.Option("--raw", "-r", help="Raw file or folder; repeatable.")
    ] = None,
    warehouse: WarehouseOpt = None,
    name: Annotated[str, typer.Option(help="Deployment name.")] = "scheduled",
    port: Annotated[int, typer.Option(help="Port of the Prefect server and its UI.")] = 4200,
) -> None:
    """Run the flow on a schedule, served from this process, with the Prefect UI.

    Without PREFECT_API_URL this starts a Prefect server (UI at http://127.0.0.1:PORT,
    its database in the warehouse folder) and stops it on Ctrl-C or SIGTERM; with
    PREFECT_API_URL set it serves against that server and starts none.
    """
    from prefect import serve as serve_deployments

    from flows.pipeline import paperlake
    from flows.prefect_server import ServerError, next_run_times, persistent_api, port_in_use

    if (cron is None) == (interval is None):
        fail("give one schedule: --cron '0 6 * * *' or --interval SECONDS")
    settings = settings_for(warehouse)
    parameters = {
        "raw": [str(p.resolve()) for p in (raw or settings.raw)],
        "warehouse": str(settings.warehouse.resolve()),
    }
    missing = [p for p in parameters["raw"] if not Path(p).exists()]
    if missing:
        fail(f"raw input {', '.join(missing)} does not exist")
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value() and port_in_use(port):
        fail(f"port {port} is in use; choose another with --port")
    try:
        with persistent_api(settings, port) as (api_url, ui_url):
            deployment = paperlake.to_deployment(
                name=name, cron=cron, interval=interval, parameters=parameters
            )
            out.print(f"Prefect API: {api_url}", highlight=False)
            if ui_url:
                out.print(f"Prefect UI: {ui_url}  (runs, logs and artifacts)", highlight=False)
            when = ", ".join(t.strftime("%H:%M:%S") for t in next_run_times(cron, interval))
            every = f"cron {cron!r}" if cron else f"every {interval} s"
            out.print(
                f"serving paperlake/{name} ({every}); next runs at about {when} UTC; "
                "Ctrl-C or SIGTERM stops it",
                highlight=False,
            )
            # One run at a time: a run that would start while another holds the
            # warehouse waits for it instead.
            serve_deployments(deployment, print_starting_message=False, limit=1)
    except ServerError as exc:
        fail(str(exc))
    out.print("stopped: the schedule and the Prefect server it started")


def main() -> None:
    """The console entry point: run the command, then leave without a slow teardown.

    Interpreter finalisation after torch, DuckDB and Prefect are loaded takes seconds and
    does nothing useful once every file is written and closed, so exit handlers run and
    the process ends at once.
    """
    import atexit
    import os

    code = 0
    try:
        app()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
