"""The paperlake flow: lock, check, ingest, embed, derive, validate, gate, publish.

The flow body is the pipeline's story: each stage is a task of flows/tasks.py, run by the
stage runner (flows/runner.py), which keeps the books beside it.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

import duckdb
import prefect.context
from prefect import flow
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY
from prefect.states import Failed, State

from flows import embed, publish, validate
from flows.core import damage
from flows.core import run_record as record
from flows.core.cluster import task_runner
from flows.core.errors import WarehouseError
from flows.core.locks import run_lock
from flows.core.settings import Settings, configure_environment, run_parameters
from flows.runner import StageRunner
from flows.tasks import (
    check_agreement,
    derive_tables,
    embed_papers,
    ingest_raw,
    publish_snapshot,
    validate_tables,
)


def run_pipeline(settings: Settings, force: bool = False) -> record.RunSummary:
    """Build a new version of the warehouse, or say it is up to date."""
    run = StageRunner(settings)
    with run_lock(settings):
        last = publish.previous_version(settings)
        publish.refuse_model_switch(settings, last.model)
        fingerprint = publish.current_fingerprint(settings)
        if last.fingerprint == fingerprint and not (force or settings.refit_topics):
            return run.up_to_date(last.version)
        record.run_logger().info(
            "run %s: %s into %s", run.run_id[:8], ", ".join(map(str, settings.raw)),
            settings.warehouse,
        )  # fmt: skip
        ingested = run.stage("ingest", ingest_raw, settings, last.shown)
        embedded = run.stage("embed", embed_papers, ingested.papers, settings, ingested.texts)
        agreement = run.beside(check_agreement, embedded, settings)
        tables = ingested.tables | {"embeddings": embedded.table}
        parameters = check_parameters(settings, embedded, ingested.papers.height)
        early = run.beside(validate_tables, tables, settings, run.run_id, parameters,
                           ingested.texts)  # fmt: skip
        tables |= run.stage("derive", derive_tables, ingested.tables, embedded, settings, last,
                            ingested.texts)  # fmt: skip
        results, docs = run.validate(early, tables, parameters)
        run.gate(tables, results, docs, ingested.texts)

        embedded.agreement = agreement.result()
        manifest = record.manifest(run.summary, settings, fingerprint, embedded, tables["sources"])
        tables |= {"dq_results": results, "runs": record.runs_row(run.summary, manifest)}
        tables["dq_results"] = run.check_history(tables, parameters)
        message = record.commit_message(run.summary)
        version, _ = run.stage(
            "publish",
            publish_snapshot,
            tables,
            settings,
            message,
            manifest,
            embedded.info.dim,
            ingested.texts,
        )
        publish.remember_published(settings, tables, version, fingerprint)
        run.after_commit(version, results, docs)
    return run.summary


def check_parameters(settings: Settings, embedded: embed.EmbedResult, papers: int) -> dict:
    """The values the suites' $PARAMETER thresholds take in this run."""
    return {
        "min_words": settings.min_words,
        "max_words": settings.max_words,
        "model_dim": embedded.info.dim,
        "papers": papers,
        "neighbors_k": settings.neighbors_k,
        "duplicate_threshold": settings.duplicate_threshold,
        "max_reject_share": settings.max_reject_share,
    }


def paperlake(**parameters: Any) -> record.RunSummary | State:
    """Build a new warehouse version from raw abstract dumps.

    The parameters are the settings of flows/core/settings.py (each None by default: the
    setting's own default) and `force`. With unchanged inputs and config the run publishes
    nothing and reports the current version, unless `force`.
    """
    configure_environment()
    force = bool(parameters.pop("force", False))
    try:
        return run_pipeline(settings_of(parameters), force=force)
    except (validate.DataQualityError, WarehouseError) as exc:
        # A stopped publish, or a warehouse that cannot take the run (another run holds it,
        # its catalog is lost or damaged, its data path is taken) is the run's outcome,
        # not a crash: the flow run ends Failed saying why, and no traceback is logged.
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


def flow_parameter_type(kind: Any) -> Any:
    """The JSON-friendly type a setting takes as a flow parameter: paths as text."""
    if kind is Path:
        return str
    if get_origin(kind) is tuple:
        return list[str]
    members = [k for k in get_args(kind) if k is not type(None)]
    return members[0] if get_origin(kind) in (UnionType, Union) and len(members) == 1 else kind


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
paperlake.__signature__ = inspect.Signature(_PARAMETERS)
paperlake.__annotations__ = {p.name: p.annotation for p in _PARAMETERS}
paperlake = flow(name="paperlake", log_prints=True)(paperlake)


def flow_for(settings: Settings):
    """The paperlake flow, its tasks on the Dask cluster `settings.cluster` names, if any."""
    if not settings.cluster:
        return paperlake

    return paperlake.with_options(task_runner=task_runner(settings.cluster))


def run_here(settings: Settings, parameters: dict[str, Any]) -> record.RunSummary:
    """Run the flow in this process, as `paperlake run` and `serve`'s warm runner do, with no
    flow-run heartbeats: they tell a server that a run it started elsewhere still lives,
    and here the caller watches the run itself."""

    context = prefect.context.get_settings_context()
    quiet = context.settings.copy_with_update(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})
    with prefect.context.SettingsContext(profile=context.profile, settings=quiet):
        return flow_for(settings)(**parameters)


def run_handed_over(parameters: dict[str, Any]) -> record.RunSummary:
    """Run the flow here for a `paperlake run` that handed its parameters to the warm runner
    of `paperlake serve` (flows/serve/warm_runner.py)."""
    return run_here(settings_of(parameters), parameters)


def warm_up(settings: Settings) -> None:
    """Load and import now what a run of `settings` uses on its way (the model, Great
    Expectations and its project, scikit-learn, the latest version's state): `paperlake
    serve` does it once for all the runs it serves."""
    embed.warm_up(settings.model, settings.device, settings.precision)
    validate.warm_up(settings.warehouse / "gx")
    publish.previous_version(settings)
