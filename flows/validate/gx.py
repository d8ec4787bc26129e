"""Great Expectations' side of validation: the file context under warehouse/gx, the suites
defined in it, row-level suites run on frames and their results stored for the Data Docs.

Imported only where rows need checking (validator.py) or Data Docs building (docs.py):
a run with nothing new never loads Great Expectations.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl


def quiet() -> None:
    """No analytics, no chatter: set before Great Expectations is imported."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    for name in ("great_expectations", "great_expectations.core", "tzlocal"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="great_expectations")


quiet()

import great_expectations as gx  # noqa: E402
from great_expectations.core.run_identifier import RunIdentifier  # noqa: E402
from great_expectations.data_context.types.resource_identifiers import (  # noqa: E402
    ExpectationSuiteIdentifier,
    ValidationResultIdentifier,
)
from great_expectations.exceptions import DataContextError  # noqa: E402
from great_expectations.expectations.expectation_configuration import (  # noqa: E402
    ExpectationConfiguration,
)

from flows.validate.checks import SAMPLE_IDS  # noqa: E402
from flows.validate.suites import ROW_HASH, Suite, column_label, suite_names  # noqa: E402

DATASOURCE = "paperlake"
WHOLE = "whole"  # each asset's batch definition: the whole frame
BATCH_ROWS = 200_000
# A suite is validated on a batch with counts and a sample of unexpected values (what the
# Data Docs show), faster than with every failing row's index; an expectation that some
# row failed (or that raised) is validated again alone for those indices.
COUNTS_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": SAMPLE_IDS}
ROWS_FORMAT = {
    "result_format": "COMPLETE",
    "unexpected_index_column_names": [ROW_HASH],
    "partial_unexpected_count": SAMPLE_IDS,
    # GX would show a pandas query on a frame that only existed inside the run.
    "return_unexpected_index_query": False,
}

# Where the project keeps its context, its stored results and its Data Docs.
CONTEXT = Path("gx")
RESULTS = CONTEXT / "uncommitted" / "validations"
SITE = CONTEXT / "uncommitted" / "data_docs" / "local_site"


@dataclass(frozen=True)
class SuiteResult:
    """A suite's Great Expectations result on one batch, to store for the Data Docs."""

    table: str
    result: Any  # an ExpectationSuiteValidationResult
    time: datetime  # one per batch, so that batches of one table never share a key


def domain_object(expectation: dict):
    """The Great Expectations expectation of a suite file's entry, with its severity."""
    severity = expectation.get("severity", "critical")
    return ExpectationConfiguration(
        type=expectation["type"],
        kwargs=expectation["kwargs"],
        severity=severity,
        meta=severity_meta(severity),
        notes=severity_note(severity),
    ).to_domain_obj()


def same_suite(stored, wanted) -> bool:
    """Whether a suite the project holds is `wanted`, made by this Great Expectations: the
    same expectations in the same order, ids aside."""

    def fields(suite) -> list[dict]:
        return [e.dict(exclude={"id", "rendered_content"}) for e in suite.expectations]

    made_by = stored.meta.get("great_expectations_version")
    return made_by == gx.__version__ and fields(stored) == fields(wanted)


def severity_meta(severity: str) -> dict:
    """An expectation's meta: its paperlake severity and whether a failure blocks the publish."""
    return {"paperlake": {"severity": severity, "blocks_publish": severity == "critical"}}


def severity_note(severity: str) -> str:
    """An expectation's note, shown on its suite's Data Docs page."""
    if severity == "critical":
        return "paperlake severity: critical. A failure blocks the publish."
    return f"paperlake severity: {severity}. A failure is reported; the run still publishes."


class GxProject:
    """A Great Expectations file context and the suites defined in it, kept for the
    process: a process that validates run after run (`paperlake serve`) opens the context
    and defines each suite once. What the project holds already (the datasource, its
    assets, a suite unchanged) is used as it is, not written again."""

    open: dict[Path, GxProject] = {}

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.context = gx.get_context(mode="file", project_root_dir=str(root))
        self.context.variables.progress_bars = {"globally": False}
        try:
            self.source = self.context.data_sources.get(DATASOURCE)
        except KeyError:  # a new project: the datasource with every suite's asset, written once
            assets = [
                {"name": name, "type": "dataframe", "batch_definitions": [{"name": WHOLE}]}
                for name in suite_names()
            ]
            self.source = self.context.data_sources.add_pandas(name=DATASOURCE, assets=assets)
        self.definitions: dict[str, tuple] = {}

    @classmethod
    def at(cls, root: Path) -> GxProject:
        """The project under `root`: the one opened before while its files remain."""
        key = root.resolve()
        project = cls.open.get(key)
        if project is None or not (key / CONTEXT / "great_expectations.yml").exists():
            project = cls.open[key] = cls(root)
        return project

    @property
    def site(self) -> Path:
        """The local Data Docs site."""
        return self.root / SITE

    def definition(self, suite: Suite) -> tuple:
        """The batch definition and suite of `suite` in the context; made once a process."""
        key = json.dumps([suite.name, suite.id_columns, suite.expectations], sort_keys=True)
        if key not in self.definitions:
            self.definitions[key] = self.define(suite)
        return self.definitions[key]

    def define(self, suite: Suite) -> tuple:
        """Add (or update) `suite` and its data asset in the context."""
        try:
            asset = self.source.get_asset(suite.name)
        except LookupError:
            asset = self.source.add_dataframe_asset(name=suite.name)
        try:
            batch = asset.get_batch_definition(WHOLE)
        except KeyError:
            batch = asset.add_batch_definition_whole_dataframe(WHOLE)
        wanted = gx.ExpectationSuite(
            name=suite.name, expectations=[domain_object(e) for e in suite.expectations]
        )
        try:
            stored = self.context.suites.get(suite.name)
        except DataContextError:
            stored = None
        if stored is not None and same_suite(stored, wanted):
            return batch, stored
        return batch, self.context.suites.add_or_update(wanted)

    def page_suites(self, names: list[str]) -> None:
        """Render now the Data Docs pages due of the suites `names` (`suite_pages_due`),
        where the site exists: a later build renders only its run's results and the
        index."""
        if (self.site / "index.html").exists() and (pages := self.suite_pages_due(names)):
            self.context.build_data_docs(resource_identifiers=pages)

    def suite_pages_due(self, names: Iterable[str]) -> list[ExpectationSuiteIdentifier]:
        """The Data Docs pages to render of the suites `names`: a suite's page changes only
        with the suite, so those missing or older than the suite's file."""
        due = []
        for name in sorted(set(names)):
            page = self.site / "expectations" / f"{name}.html"
            stored = self.root / CONTEXT / "expectations" / f"{name}.json"
            if not stored.exists():  # no suite of that name to render
                continue
            if not page.exists() or page.stat().st_mtime_ns < stored.stat().st_mtime_ns:
                due.append(ExpectationSuiteIdentifier(name=name))
        return due

    def store(self, run_id: str, suite_result: SuiteResult) -> ValidationResultIdentifier:
        """Keep a suite result for the Data Docs under the run's id and the table's name.

        Stored here rather than by a ValidationDefinition run, which names every result
        `__none__` and a dataframe batch's asset None, and would have to be stored twice.
        """
        result = suite_result.result
        run = RunIdentifier(run_name=run_id, run_time=suite_result.time)
        result.meta["run_id"] = run
        result.meta["validation_time"] = run.run_time
        result.meta["batch_spec"] = {
            **(result.meta.get("batch_spec") or {}),
            "data_asset_name": suite_result.table,
        }
        suite_key = ExpectationSuiteIdentifier(name=suite_result.table)
        key = ValidationResultIdentifier(
            expectation_suite_identifier=suite_key, run_id=run, batch_identifier=result.batch_id
        )
        self.context.validation_results_store.store_validation_results(result, key, suite_key)
        return key


@dataclass
class RowChecks:
    """What Great Expectations found of a row-level suite on some rows."""

    fields: list[dict]  # each expectation's result fields that do not depend on the rows
    failures: list[set[int]]  # each expectation's failing row hashes
    results: list[SuiteResult] = field(default_factory=list)  # one per batch


def run_suite(project: GxProject, suite: Suite, fresh: pl.DataFrame, parameters: dict) -> RowChecks:
    """Run the row-level `suite` on `fresh` (with its ROW_HASH column), in batches."""
    whole, gx_suite = project.definition(suite)
    batches = [fresh] if fresh.height <= BATCH_ROWS else fresh.iter_slices(BATCH_ROWS)
    checks = RowChecks([], [set() for _ in suite.expectations])
    for batch in batches:
        gx_batch = whole.get_batch(batch_parameters={"dataframe": batch.to_pandas()})
        result = gx_batch.validate(
            gx_suite, expectation_parameters=parameters, result_format=COUNTS_FORMAT
        )
        checks.results.append(SuiteResult(suite.name, result, datetime.now(UTC)))
        checks.fields = []
        for index, expectation in enumerate(suite.expectations):
            res = result_for(result.results, expectation)
            if not clean(res):  # which rows failed: this expectation again, for them
                rows = gx_batch.validate(
                    res.expectation_config.to_domain_obj(), result_format=ROWS_FORMAT
                )
                checks.failures[index].update(
                    int(item[ROW_HASH])
                    for item in (rows.result or {}).get("unexpected_index_list") or []
                    if isinstance(item, dict)
                )
            checks.fields.append(result_fields(res))
    return checks


def clean(res) -> bool:
    """Whether a Great Expectations result saw no unexpected row and no error."""
    return bool(res.success) and not (res.result or {}).get("unexpected_count")


def result_for(results: list, expectation: dict):
    """The Great Expectations result of one expectation of a suite file: same type, same
    kwargs (a $PARAMETER matches its value; GX turns some numbers into floats)."""

    def same(given, used) -> bool:
        if isinstance(given, dict):  # {"$PARAMETER": name}, resolved by GX
            return True
        if isinstance(given, int | float) and isinstance(used, int | float):
            return float(given) == float(used)
        return given == used

    for res in results:
        config = res.expectation_config
        kwargs = {k: v for k, v in config.kwargs.items() if k != "batch_id"}
        if (
            config.type == expectation["type"]
            and set(kwargs) == set(expectation["kwargs"])
            and all(same(v, kwargs[k]) for k, v in expectation["kwargs"].items())
        ):
            return res
    raise KeyError(f"no result for {expectation['type']} {expectation['kwargs']}")


def result_fields(res) -> dict:
    """An expectation result's fields that do not depend on the rows."""
    config = res.expectation_config
    kwargs = {k: v for k, v in config.kwargs.items() if k != "batch_id"}
    severity = getattr(config.severity, "value", str(config.severity))
    return {
        "expectation": config.type,
        "column_name": column_label(kwargs),
        "kwargs": json.dumps(kwargs, sort_keys=True, default=str),
        "severity": severity,
        "mostly": kwargs.get("mostly"),
        "column": kwargs.get("column"),
    }
