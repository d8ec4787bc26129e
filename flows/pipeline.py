"""The paperlake flow: lock, check, ingest, embed, aggregate, validate, publish. Wiring only.

Each stage is a task that takes and returns plain data (frames, small dataclasses), so it
can run on any worker; flows/core/run_record.py keeps the books beside it.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

import duckdb
import numpy as np
import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Failed, State

from flows import embed, ingest, publish, validate
from flows.core import cache, damage
from flows.core import run_record as record
from flows.core.cluster import cluster_workers, fan_out, on_workers
from flows.core.errors import WarehouseError
from flows.core.lake import connect
from flows.core.locks import run_lock
from flows.core.settings import Settings, configure_environment, run_parameters
from flows.core.tables import aggregate_tables
from flows.derive import aggregate
from flows.derive.neighbour_lists import NeighbourLists
from flows.ingest.cache import ParseCache
from flows.publish import published
from flows.publish.after_commit import compact_catalog_when_due, write_data_docs, write_page
from flows.serve import warm_runner


@dataclass
class Ingested:
    """What ingest hands on: the file, paper, location and reject tables."""

    result: ingest.IngestResult
    papers: pl.DataFrame
    paper_sources: pl.DataFrame

    @property
    def tables(self) -> dict[str, pl.DataFrame]:
        return {
            "sources": self.result.sources.sort("path"),
            "papers": self.papers,
            "paper_sources": self.paper_sources,
            "rejects": self.result.rejects.sort("source_path", "record_no"),
        }


def staged(
    tables: dict[str, pl.DataFrame], con: duckdb.DuckDBPyConnection | None = None
) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB (or `con`) with `tables` in it (memory.main), for SQL."""
    con = con or connect(extensions=())
    publish.stage_frames(con, tables)
    return con


@task(name="ingest_raw", cache_policy=NO_CACHE)
def ingest_raw(settings: Settings) -> Ingested:
    """Read the raw files (unchanged ones from the parse cache) into papers and rejects.

    On a cluster, each file not parsed yet is first parsed by a worker into the cache.
    """
    parsed: set[str] = set()  # files the workers parsed (the run reads them from the cache)
    if fan := on_workers(parse_file, settings=settings):
        jobs = ingest.pending_parses(
            settings.raw, settings.min_words, settings.max_words, settings.cache_path / "parsed"
        )
        fan(jobs)
        parsed = {ingest.shown(job.path) for job in jobs}  # as sources rows name them
    with ingest.reading_progress() as advance:
        result = ingest.ingest(
            settings.raw,
            min_words=settings.min_words,
            max_words=settings.max_words,
            cache_dir=settings.cache_path / "parsed",
            progress=advance,
        )
    for source in result.files:
        source.cached = source.cached and source.path not in parsed
    papers, paper_sources = ingest.build_papers(result.records)
    return Ingested(result, papers, paper_sources)


@task(name="parse_file", cache_policy=NO_CACHE)
def parse_file(job: ingest.ParseJob, settings: Settings) -> str:
    """Parse one raw file into the parse cache (on a worker); its counts, for the log."""
    cache = ParseCache(settings.cache_path / "parsed", settings.min_words, settings.max_words)
    source, _, _ = ingest.parse_into_cache(job, cache)
    return f"{source.path}: {source.accepted} accepted, {source.rejected} rejected"


@task(name="embed_papers", cache_policy=NO_CACHE)
def embed_papers(papers: pl.DataFrame, settings: Settings) -> embed.EmbedResult:
    """Vectors for every paper; only texts new for this model are encoded.

    On a cluster, the texts to encode go to the workers in shards (`encode_shard`).
    """
    _, info = embed.load_model(settings.model, settings.device, settings.precision)
    return embed.embed_papers(
        papers,
        settings.model,
        settings.batch_size,
        settings.device,
        settings.precision,
        cache_dir=settings.cache_path / "embeddings",
        # Workers load the model the flow resolved: the same device and precision.
        on_workers=on_workers(
            encode_shard, settings=settings.with_(device=info.device, precision=info.precision)
        ),
        pieces=2 * cluster_workers(),
        check=False,  # `check_agreement` runs beside the aggregate stage
    )


def check_agreement(embedded: embed.EmbedResult, settings: Settings) -> dict | None:
    """Cosine of the run's reduced-precision vectors to fp32 ones, on a sample of the texts
    encoded now (None when none was, or at fp32)."""
    return embed.check_sample(embedded, settings.model, settings.device)


@task(name="encode_shard", cache_policy=NO_CACHE)
def encode_shard(shard: pl.DataFrame, settings: Settings) -> tuple[str, int]:
    """Encode one shard of texts into the embedding cache (on a worker): its part and count."""
    return embed.encode_shard(
        shard, settings.model, settings.batch_size, settings.device, settings.precision,
        settings.cache_path / "embeddings",
    )  # fmt: skip


@task(name="neighbor_rows", cache_policy=NO_CACHE)
def neighbor_rows(rows: tuple[int, int], matrix: Path, graph: Path | None, settings: Settings):
    """Neighbours and near-duplicate pairs of rows [first, stop) of the matrix file, against
    every paper, exactly or through the graph file (on a worker)."""
    width = max(settings.neighbors_k, aggregate.PAIR_CAP)
    return aggregate.search_rows(rows, matrix, graph, width, settings.duplicate_threshold)


@task(name="aggregate_papers", cache_policy=NO_CACHE)
def aggregate_papers(
    inputs: dict[str, pl.DataFrame],
    embeddings: pl.DataFrame,
    settings: Settings,
    model_key: str,
    last: publish.Previous,
) -> dict[str, pl.DataFrame]:
    """Neighbours, near-duplicates, topics, mentions and stats, built in DuckDB from sql/.

    `model_key` names the vectors (model, weights, precision): the last run's neighbour
    lists are updated only for vectors of the same model. `last` is what the latest
    version holds: its topics and map carry over.
    """
    previous = {topic: np.asarray(c, dtype=np.float32) for topic, c in last.centroids.items()}
    width = max(settings.neighbors_k, aggregate.PAIR_CAP)
    folder = settings.cache_path / "neighbors"
    kept = (settings.neighbors_k, settings.duplicate_threshold)
    exact_lists = NeighbourLists(folder, model_key, width, *kept)
    graph_lists = NeighbourLists(folder, f"{model_key}:graph", width, *kept)
    workers = cluster_workers()

    def search(ids: list[str], vectors: np.ndarray) -> pl.DataFrame:
        """Update the last run's lists where there are any; else search, on the cluster's
        workers where there is one.

        Exact mode updates only exact lists (the result equals a new exact search). Above
        `exact_neighbors_max` the lists a graph search left (or exact ones from a smaller
        warehouse) are updated the same way: new papers and papers that lost a neighbour
        are searched exactly against all, so a run costs what changed there too, and its
        lists are at least as good as the graph's.
        """
        exact = aggregate.neighbor_method(
            settings.neighbors_method, len(ids), settings.exact_neighbors_max
        ) == "exact"  # fmt: skip
        lists, other = (exact_lists, graph_lists) if exact else (graph_lists, exact_lists)
        previous = lists.load() or (None if exact else exact_lists.load())
        if previous:
            found = aggregate.update_candidates(ids, vectors, width, *previous, *kept)
            came, left = set(ids).difference(previous[1]), set(previous[1]).difference(ids)
            record.run_logger().info(
                "neighbours: the last run's lists updated (%d papers new, %d gone)",
                len(came), len(left),
            )  # fmt: skip
        elif workers:
            found = aggregate.nearest_in_pieces(
                ids, vectors, width, settings.duplicate_threshold,
                settings.neighbors_method, settings.exact_neighbors_max,
                settings.cache_path / "neighbors",
                lambda ranges, matrix, graph: fan_out(
                    neighbor_rows, ranges, matrix=matrix, graph=graph, settings=settings
                ),
                pieces=2 * workers,
            )  # fmt: skip
        else:
            found = aggregate.candidates(
                ids, vectors, width, settings.duplicate_threshold, settings.neighbors_method,
                settings.exact_neighbors_max,
            )  # fmt: skip
        if not previous:  # a search's lists, trimmed as an update leaves them
            found = aggregate.trim_lists(found, *kept)
        lists.save(ids, found)
        cache.drop(other.path)  # one kind of list at a time: no stale ones
        return found

    # Staged without the abstracts (the SQL that reads them reads `inputs["papers"]`, see
    # build_aggregates) and the raw abstracts, which no SQL of sql/ reads.
    text = ["abstract", "abstract_raw"]
    con = staged(inputs | {"papers": inputs["papers"].drop(text, strict=False)})
    try:
        aggregate.build_aggregates(
            con,
            inputs["papers"],
            embeddings,
            k=settings.neighbors_k,
            threshold=settings.duplicate_threshold,
            n_topics=settings.n_topics,
            seed=settings.seed,
            previous_topics=previous,
            previous_papers=last.papers,
            previous_assignments=last.assignments,
            neighbors_method=settings.neighbors_method,
            exact_neighbors_max=settings.exact_neighbors_max,
            search=search,
            duplicate_group_max=settings.duplicate_group_max,
            refit_topics=settings.refit_topics,
            say=record.run_logger().info,
            previous_coordinates=last.coordinates,
            cache=settings.cache_path / "paper_rows",
        )
        return {name: con.table(name).pl() for name in aggregate_tables()}
    finally:
        con.close()


@task(name="validate_tables", cache_policy=NO_CACHE)
def validate_tables(
    tables: dict[str, pl.DataFrame],
    settings: Settings,
    run_id: str,
    parameters: dict,
    suites: list[str] | None = None,
) -> tuple[pl.DataFrame, list]:
    """Run each suite of `suites` (default: every suite in expectations/) on its table: the
    dq_results rows, and the suite results for the Data Docs (`write_data_docs` stores
    them)."""
    validator = validate.Validator(settings.warehouse / "gx", run_id, settings.cache_path / "dq")
    results = [
        validator.validate(name, tables[name], parameters)
        for name in (validate.suite_names() if suites is None else suites)
    ]
    return pl.concat(results), validator.unstored


def suites_of(tables: dict[str, pl.DataFrame]) -> list[str]:
    """The suites whose tables are among `tables`."""
    return [name for name in validate.suite_names() if name in tables]


@dataclass
class Planned:
    """A publish planned while the suites run: the keyed tables staged on `con`, the
    catalog attached for writing and each table's plan (publish.prepare)."""

    con: duckdb.DuckDBPyConnection
    plans: dict[str, str]
    hashes: dict[str, pl.DataFrame] | None  # publish.row_hashes of each keyed table, if kept
    digests: dict[str, str] | None = None  # published.table_digest of each, where compared
    version: int | None = None  # the version the commit will make
    trend: pl.DataFrame | None = None  # the page's trend up to the latest version
    kept: bool = False  # the connection went to publish.keep_committed

    def close(self) -> None:
        """Drop the plans: detach the catalog and close the connection (idempotent)."""
        if self.kept:
            return
        with contextlib.suppress(duckdb.Error):  # detached already (by a commit)
            publish.detach(self.con)
        self.con.close()

    def keep(self, settings: Settings) -> None:
        """After the commit: keep the connection, with the tables it staged, for the next
        run's plan (publish.keep_committed), where those were compared whole."""
        if self.hashes is None:
            self.kept = publish.keep_committed(settings, self.con)


def connect_staging(settings: Settings) -> Future:
    """A connection for `plan_publish`, ducklake loaded, as a future: the last run's, which
    holds the tables of the latest version (publish.take_committed), else the spare one made
    between runs (`keep_spare_connection`) where there is one, else one made now in a
    thread. Not a task: it only loads an extension, and a task costs its flow run about
    three state changes, each an event the Prefect server stores."""
    if (kept := publish.take_committed(settings)) is not None:
        ready: Future = Future()
        ready.set_result(kept)
        return ready
    if not _SPARE:
        keep_spare_connection()
    return _SPARE.pop()


_SPARE: list[Future] = []  # at most one connection being made for the next run


def keep_spare_connection() -> None:
    """Load ducklake on a new connection now, in a thread, for the next run's publish to
    take. A process that runs flow after flow (`paperlake serve`) calls it between runs:
    loading ducklake takes 0.19 s, most of it holding the GIL (the extension's signature
    is checked on every load), which a run's stages beside it waited for."""
    if not _SPARE:
        _SPARE.append(in_thread("spare", connect, extensions=("ducklake",)))


def in_thread(name: str, fn: Any, *args: Any, **kwargs: Any) -> Future:
    """Call `fn` in a new thread (paperlake-<name>), in a copy of this thread's context (a
    flow run's logger logs to its run there): its future."""
    worker = ThreadPoolExecutor(1, thread_name_prefix=f"paperlake-{name}")
    future = worker.submit(contextvars.copy_context().run, fn, *args, **kwargs)
    worker.shutdown(wait=False)
    return future


def keyed_frames(tables: dict[str, pl.DataFrame]) -> tuple[dict[str, pl.DataFrame], bool]:
    """The keyed tables, and whether they are planned from row hashes (large ones)."""
    frames = {name: tables[name] for name in publish.TABLE_KEYS}
    return frames, sum(f.height for f in frames.values()) >= publish.HASHED_PLAN_ROWS


def stage_keyed(tables: dict[str, pl.DataFrame], con: duckdb.DuckDBPyConnection) -> bool:
    """Stage the keyed tables on `con` now, where they are compared with the catalog whole
    (small ones); whether it did. Done before the suites start, as staging reads each frame
    under the GIL that the suites hold beside it: on the sample 0.13 s alone, 0.5 s beside
    them. The comparison (`plan_publish`) then runs in DuckDB beside the suites."""
    frames, hashed = keyed_frames(tables)
    if not hashed:
        publish.stage_frames(con, frames)
    return not hashed


def plan_publish(
    tables: dict[str, pl.DataFrame],
    settings: Settings,
    con: duckdb.DuckDBPyConnection | None = None,
    staged: bool = False,
) -> Planned:
    """Plan the keyed tables' changes against the catalog (which this attaches and locks for
    writing) and stage them, on `con` or a new connection, ready for the commit once the
    checks pass. `staged`: `stage_keyed` staged them on `con` already."""
    frames, hashed = keyed_frames(tables)
    hashes = digests = None
    if hashed:
        hashes = {
            name: publish.row_hashes(frames[name], k) for name, k in publish.TABLE_KEYS.items()
        }
    else:
        digests = {name: published.table_digest(frame) for name, frame in frames.items()}
    con = con or connect(extensions=())
    try:
        plans = publish.prepare(con, settings, None if staged else frames, hashes, digests)
        # What the version's page needs of the catalog, read now: the page is gathered
        # beside the commit, which holds the catalog then.
        return Planned(
            con, plans, hashes, digests, publish.next_version(con), validate.latest_trend(con)
        )
    except BaseException:
        con.close()
        raise


@contextlib.contextmanager
def prompt_gil(interval: float = 0.0005):
    """Within it, a thread waiting for the GIL gets it within `interval` seconds, not
    Python's 5 ms. A run's threads mix DuckDB and Python: the publish is planned beside
    the suites and committed beside the Data Docs, which hold the GIL in Python, and each
    DuckDB statement takes the GIL back at its end, so each waited up to 5 ms. The plan's
    64 statements took 0.5 s alone, 1.3 s beside a busy Python thread and 0.8 s with
    0.5 ms; +1 on the sample in `serve`, 10 rounds each, alternating: median 3.12 s with
    5 ms for the whole run, 2.88 s with 0.5 ms."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, interval))
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def release(planned: Any) -> None:
    """Close the connection of a `plan_publish` (or `connect_staging`) future, whatever
    became of the run."""
    if planned is None:
        return
    value = None if planned.exception() else planned.result()
    if isinstance(value, Planned | duckdb.DuckDBPyConnection):
        value.close()


@task(name="publish_snapshot", cache_policy=NO_CACHE)
def publish_snapshot(
    tables: dict[str, pl.DataFrame],
    settings: Settings,
    message: str,
    manifest: dict,
    dim: int,
    planned: Planned | None = None,
) -> tuple[int, dict]:
    """Commit the tables to the DuckLake catalog as one snapshot.

    `planned`: the keyed tables staged and planned while the suites ran (`plan_publish`);
    then only the history tables are staged here. Without it, all is done here.
    """
    if planned is None:
        con = staged(tables)
        try:
            return publish.publish(con, settings, message, manifest, dim)
        finally:
            con.close()
    staged({name: tables[name] for name in publish.HISTORY_TABLES}, planned.con)
    kept = (settings, planned.hashes) if planned.hashes is not None else None
    digests = (settings, planned.digests) if planned.digests is not None else None
    return publish.commit(
        planned.con, settings, planned.plans, message, manifest, dim, kept, digests
    )


def warm_up(settings: Settings) -> None:
    """Load and import now what a run of `settings` uses on its way: the model (and the fp32
    model its agreement check uses), Great Expectations (its project in the warehouse, every
    suite defined), scikit-learn, the latest version's state and a connection with ducklake
    loaded for the first run's publish: `paperlake serve` does it once for all the runs it
    serves."""
    embed.warm_up(settings.model, settings.device, settings.precision)
    validate.warm_up(settings.warehouse / "gx")
    aggregate.warm_up()
    publish.previous_version(settings)  # read once; kept while the catalog is unchanged
    keep_spare_connection()
    # A process's first flow run imports FastAPI, with which Prefect serializes the flow's
    # parameters, and copies Prefect's settings without heartbeats: 1.2 s of it, done now.
    import prefect.context

    paperlake.serialize_parameters({"warehouse": str(settings.warehouse)})
    without_heartbeats(prefect.context.get_settings_context().settings)


def flow_parameter_type(kind: Any) -> Any:
    """The JSON-friendly type a setting takes as a flow parameter: paths as text."""
    if kind is Path:
        return str
    if get_origin(kind) is tuple:
        return list[str]
    members = [k for k in get_args(kind) if k is not type(None)]
    return members[0] if get_origin(kind) in (UnionType, Union) and len(members) == 1 else kind


def run_flow(**parameters: Any) -> record.RunSummary | State:
    """Build a new warehouse version from raw abstract dumps.

    The parameters are the settings of flows/core/settings.py (derived from Settings, each None
    by default: the setting's own default) and `force`. With unchanged inputs and config
    the run publishes nothing and reports the current version, unless `force`.
    """
    configure_environment()
    force = bool(parameters.pop("force", False))
    settings = settings_of(parameters)
    try:
        return run_pipeline(settings, force=force)
    except (validate.DataQualityError, WarehouseError) as exc:
        # A stopped publish, or a warehouse that cannot take the run (another run holds it,
        # its catalog is lost or damaged, its data path is taken) is the run's outcome,
        # not a crash: the flow run ends Failed saying why, the caller gets the error, and
        # no traceback is logged.
        return Failed(message=str(exc), data=exc)
    except duckdb.Error as exc:  # a data file gone, a catalog damaged: the same, in words
        if (told := damage.told(exc)) is None:
            raise
        return Failed(message=str(told), data=told)


def settings_of(parameters: dict[str, Any]) -> Settings:
    """The settings a run's flow parameters give (None: the setting's default)."""
    given = {k: v for k, v in parameters.items() if v is not None and k != "force"}
    if "raw" in given:
        given["raw"] = tuple(Path(p) for p in given["raw"])
    return Settings(**given)


def run_here(settings: Settings, parameters: dict[str, Any]) -> record.RunSummary:
    """Run the flow in this process, as `paperlake run` does, without flow-run heartbeats.

    Heartbeats tell a server that a run it started elsewhere still lives; here the caller
    watches the run itself. Prefect joins its heartbeat thread at the end of a run, which
    waits for the thread's one-second sleep: 0.5 s a run on average (measured on the
    sample). Runs `serve` starts on its schedule keep theirs.
    """
    import prefect.context

    context = prefect.context.get_settings_context()
    with prefect.context.SettingsContext(
        profile=context.profile, settings=without_heartbeats(context.settings)
    ):
        return flow_for(settings)(**parameters)


_WITHOUT_HEARTBEATS: list = []  # [(settings, the same without heartbeats)], the latest only


def without_heartbeats(current: Any) -> Any:
    """Prefect settings `current` without flow-run heartbeats. Copying Prefect's settings
    reads the environment and validates every field (0.07 s); a process that runs flow
    after flow under the same settings (`paperlake serve`) copies them once."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY

    if not (_WITHOUT_HEARTBEATS and _WITHOUT_HEARTBEATS[0][0] is current):
        quiet = current.copy_with_update(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})
        _WITHOUT_HEARTBEATS[:] = [(current, quiet)]
    return _WITHOUT_HEARTBEATS[0][1]


def run_handed_over(parameters: dict[str, Any]) -> record.RunSummary:
    """Run the flow in this process for a `paperlake run` that handed its parameters to the
    warm runner of `paperlake serve` (flows/serve/warm_runner.py); then make the next run's
    publish connection ready."""
    try:
        return run_here(settings_of(parameters), parameters)
    finally:
        keep_spare_connection()


# The flow's parameters are declared by Settings: Prefect reads them from the signature.
_PARAMETERS = [
    inspect.Parameter(
        p.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=flow_parameter_type(p.type) | None,
    )
    for p in run_parameters()
] + [inspect.Parameter("force", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=bool)]
run_flow.__signature__ = inspect.Signature(_PARAMETERS)
run_flow.__annotations__ = {p.name: p.annotation for p in _PARAMETERS}
paperlake = flow(name="paperlake", log_prints=True)(run_flow)


def flow_for(settings: Settings):
    """The paperlake flow, its tasks on the Dask cluster `settings.cluster` names, if any."""
    if not settings.cluster:
        return paperlake
    from flows.core.cluster import task_runner

    return paperlake.with_options(task_runner=task_runner(settings.cluster))


def run_pipeline(settings: Settings, force: bool = False) -> record.RunSummary:
    """The pipeline: lock, check, ingest, embed, aggregate, validate and gate, publish."""
    summary = record.new_summary(settings)
    timer = time.perf_counter
    with run_lock(settings), prompt_gil():
        fingerprint = publish.current_fingerprint(settings)
        previous = publish.previous_version(settings)
        if previous.fingerprint == fingerprint and not (force or settings.refit_topics):
            summary.version, summary.status = previous.version, "up to date"
            warm_runner.outcome_ready(summary)
            record.report_artifacts(summary, None)
            return summary
        record.run_logger().info(
            "run %s: %s into %s", summary.run_id[:8], ", ".join(map(str, settings.raw)),
            summary.warehouse,
        )  # fmt: skip

        # The suites of ingest's tables and the embeddings run in a thread beside the
        # aggregate stage. Beside the other suites (Python, mostly), a thread of this
        # process plans the publish in DuckDB, on a connection that loaded ducklake while
        # the papers were embedded; the commit waits for the gate. The Data Docs are written
        # while the version is checked and published, in a thread too. On a Dask task
        # runner the suites run after the aggregate stage, the publish task stages and
        # plans after the gate, and the Data Docs are written after it, here where the
        # warehouse is. The work beside the stages (the fp32 agreement check, the plan,
        # the Data Docs, the page) runs in plain threads, not as Prefect tasks: each task
        # is state changes and log lines for the Prefect server to store, on the same
        # cores. +1 handed to `serve`, paired with those three as tasks, 12 rounds twice:
        # median 0.11 and 0.14 s shorter, 0.2 s less CPU a run.
        planned = docs = suite_results = agreement = staging = early_results = gathering = None
        in_process = not cluster_workers()  # no Dask task runner
        try:
            t = timer()
            ingested = ingest_raw(settings)
            record.ingested(summary, ingested.result, ingested.papers,
                            ingested.paper_sources.height, timer() - t)  # fmt: skip

            # Loading ducklake holds up Python code beside it (0.15 s: its signature is
            # checked), less so the encoder's and DuckDB's native work.
            staging = connect_staging(settings) if in_process else None
            t = timer()
            embedded = embed_papers(ingested.papers, settings)
            record.embedded(summary, embedded, timer() - t)
            # A few texts encoded again at fp32 (about 0.4 s with the model's load), in a
            # thread beside the aggregate stage; the manifest records the outcome.
            if embedded.sample:
                agreement = in_thread("agreement", check_agreement, embedded, settings)

            t = timer()
            tables = ingested.tables | {"embeddings": embedded.table.sort("paper_id")}
            # The suites of the tables made so far run in a thread beside the aggregate
            # stage (mostly DuckDB and numpy); the rest run once it is done.
            parameters = check_parameters(settings, embedded, ingested)
            early = suites_of(tables) if in_process else []
            if early:
                # Both sides' libraries imported first (a no-op where `serve` or the CLI's
                # start-up did it): threads importing the same circular packages at once
                # (narwhals, through scikit-learn and Great Expectations) can deadlock.
                aggregate.warm_up()
                validate.warm_up()
                early_results = validate_tables.submit(
                    tables, settings, summary.run_id, parameters, early
                )
            info = embedded.info
            model_key = f"{info.model_id}:{info.weights_sha256}:{info.precision}"
            tables |= aggregate_papers(
                ingested.tables, embedded.table, settings, model_key, previous
            )
            record.aggregated(summary, tables, timer() - t)

            if in_process:
                con = staging.result()
                planned = in_thread(
                    "plan", plan_publish, dict(tables), settings, con, stage_keyed(tables, con)
                )
            t = timer()
            results, suite_results = checked(
                early, early_results, tables, settings, summary.run_id, parameters
            )
            record.write_dq_file(settings, summary.run_id, results)
            record.validated(summary, validate.outcome(results), results, timer() - t)
            if in_process:
                docs = in_thread("docs", write_data_docs, settings, summary.run_id, suite_results)
            if validate.blocking_failures(results).height:
                release(planned)  # the stopped run's page reads the catalog
            gate(summary, settings, tables, results)

            t = timer()
            tables["dq_results"] = results
            if agreement:
                embedded.agreement = agreement.result()
            manifest = record.manifest(summary, settings, fingerprint, embedded, tables["sources"])
            tables["runs"] = record.runs_row(summary, manifest)
            message = record.commit_message(summary)
            plan = planned.result() if planned else None
            # The version's page is gathered from the run's tables beside the commit; on a
            # cluster, from the catalog after it. It is written once the Data Docs are (it
            # links them).
            if plan:
                gathering = in_thread(
                    "page", validate.build_page_while_publishing, dict(tables), results, plan.trend,
                    plan.version,
                )  # fmt: skip
            version, changes = publish_snapshot(
                tables, settings, message, manifest, embedded.info.dim, plan
            )
            record.published(summary, version, changes, timer() - t)
            publish.remember_published(settings, tables, version, fingerprint)
            if gathering and plan.version == version:
                page = gathering.result()
            else:
                page = validate.build_page(settings, version, plan.con if plan else None)
            if plan:
                plan.keep(settings)
        finally:
            release(planned if planned is not None else staging)
            # A stopped run leaves no thread behind.
            if early_results:
                early_results.wait()
            for future in (agreement, gathering):
                if future:
                    future.exception()
            if suite_results is not None:
                summary.data_docs = (
                    docs.result()
                    if docs
                    else write_data_docs(settings, summary.run_id, suite_results)
                )
        compact_catalog_when_due(settings, version)
    write_page(summary, settings, page, version)
    warm_runner.outcome_ready(summary)
    record.report_artifacts(summary, results)
    return summary


def checked(
    early: list[str],
    early_results: Any,
    tables: dict[str, pl.DataFrame],
    settings: Settings,
    run_id: str,
    parameters: dict,
) -> tuple[pl.DataFrame, list]:
    """The dq_results rows of every suite, in suite order, and the suite results: those of
    the suites `early` (`early_results`, a `validate_tables` future) and the others', run
    now, once `early`'s are done (they share the Great Expectations project)."""
    rows, results = early_results.result() if early else (None, [])
    rest = [name for name in validate.suite_names() if name not in early]
    later, later_results = validate_tables(tables, settings, run_id, parameters, rest)
    if rows is None:
        return later, later_results
    order = {name: i for i, name in enumerate(validate.suite_names())}
    rows = pl.concat([rows, later]).sort(pl.col("suite").replace_strict(order), maintain_order=True)
    return rows, [*results, *later_results]


def check_parameters(settings: Settings, embedded: embed.EmbedResult, ingested: Ingested) -> dict:
    """The values the suites' $PARAMETER thresholds take in this run."""
    return {
        "min_words": settings.min_words,
        "max_words": settings.max_words,
        "model_dim": embedded.info.dim,
        "papers": ingested.papers.height,
        "neighbors_k": settings.neighbors_k,
        "duplicate_threshold": settings.duplicate_threshold,
        "max_reject_share": settings.max_reject_share,
    }


def gate(
    summary: record.RunSummary,
    settings: Settings,
    tables: dict[str, pl.DataFrame],
    results: pl.DataFrame,
) -> None:
    """Stop before publish where a blocking check failed; the stopped run gets its page."""
    failures = validate.blocking_failures(results)
    if not failures.height:
        return
    summary.status = "failed"
    con = staged(tables)
    try:  # warehouse/dq/<run_id>.html, from the run's own tables
        summary.dq_page = str(validate.write_run_page(con, settings, summary.run_id, results))
    finally:
        con.close()
    record.report_artifacts(summary, results)
    raise validate.DataQualityError(failures)
