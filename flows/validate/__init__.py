"""Validate: run the Great Expectations suites in expectations/ against staged tables.

Suites are JSON files, one per table. Severity `critical` marks a blocking check: a
failure stops the publish. Results become dq_results rows and HTML Data Docs, where each
result is named by the paperlake run and its table and each expectation carries its
severity; the Data Docs load their styles from CDNs, so flows/validate/page/ writes the page that
reads offline.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import threading
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from flows.core import tables
from flows.core.lake import read_sql
from flows.core.settings import EXPECTATIONS_DIR
from flows.validate.row_memo import RowMemo, resolve

BATCH_ROWS = 200_000
# Stored results per suite that the Data Docs show: each build of the index reads them all
# (about 0.25 s a build with 10 a suite, 0.42 s with 30); dq_results keeps every outcome.
KEEP_RESULTS = 10
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

    def row_level(self) -> Suite:
        """The expectations of single rows, the rows named by their hash: what Great
        Expectations runs of this suite."""
        rows = tuple(e for e in self.expectations if e["type"] in ROW_LEVEL)
        return Suite(self.name, (ROW_HASH,), rows)


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


@lru_cache(maxsize=1)
def share_compiled_templates() -> None:
    """Great Expectations renders each Data Docs page in a new Jinja environment, which
    compiled its templates again for every build (about 0.15 s of each run's Data Docs on
    the sample): the environments share one bytecode cache, kept for the process."""
    from great_expectations.render.view.view import DefaultJinjaView
    from jinja2 import BytecodeCache

    class InMemory(BytecodeCache):
        def __init__(self):
            self.code: dict[tuple[str, str], bytes] = {}

        def load_bytecode(self, bucket) -> None:
            if (code := self.code.get((bucket.key, bucket.checksum))) is not None:
                bucket.bytecode_from_string(code)

        def dump_bytecode(self, bucket) -> None:
            self.code[(bucket.key, bucket.checksum)] = bucket.bytecode_to_string()

    cache = InMemory()
    make_environment = DefaultJinjaView.__init__

    @functools.wraps(make_environment)
    def with_shared_cache(self, *args, **kwargs) -> None:
        make_environment(self, *args, **kwargs)
        self.env.bytecode_cache = cache

    DefaultJinjaView.__init__ = with_shared_cache


_configurations = threading.local()


@lru_cache(maxsize=1)
def reuse_configurations() -> None:
    """Great Expectations builds an expectation's configuration anew (a pydantic dict of
    every field) each time one of its keyword arguments is read: about 50 times for each
    expectation validated. Inside `configurations_reused` each expectation object builds it
    once (a +1 run's suites on the sample: 1.0 s, 0.77 s with it, medians of 10). The
    scope is one validation call, in which Great Expectations makes the expectation
    objects from configurations and only reads them; outside it nothing changes."""
    from great_expectations.expectations.expectation import Expectation

    build = Expectation.configuration.fget

    def configuration(self):
        memo = getattr(_configurations, "memo", None)
        if memo is None:
            return build(self)
        hit = memo.get(id(self))
        if hit is None or hit[0] is not self:  # held below: an id is not reused meanwhile
            hit = memo[id(self)] = (self, build(self))
        return hit[1]

    Expectation.configuration = property(configuration, doc=Expectation.configuration.__doc__)


@contextlib.contextmanager
def configurations_reused():
    """Within it, this thread's expectation objects build their configuration once each
    (`reuse_configurations`)."""
    reuse_configurations()
    _configurations.memo = {}
    try:
        yield
    finally:
        _configurations.memo = None


# Expectations whose outcome for a row depends on that row alone: a row checked once keeps
# its outcome while its content, the suite and the parameters stay the same.
ROW_LEVEL = frozenset(
    {
        "expect_column_values_to_not_be_null",
        "expect_column_values_to_be_null",
        "expect_column_values_to_be_between",
        "expect_column_values_to_be_in_set",
        "expect_column_values_to_match_regex",
        "expect_column_values_to_not_match_regex",
        "expect_column_value_lengths_to_be_between",
        "expect_column_pair_values_to_be_equal",
        "expect_column_pair_values_a_to_be_greater_than_b",
    }
)
# Expectations over the whole table, computed in DuckDB (sql/dq/duplicate_keys.sql).
TABLE_LEVEL = frozenset(
    {
        "expect_column_values_to_be_unique",
        "expect_compound_columns_to_be_unique",
        "expect_table_row_count_to_equal",
    }
)
ROW_HASH = "_row_hash"
# A suite is validated on a batch with counts and a sample of unexpected values (what the
# Data Docs show), about twice as fast as with every failing row's index; an expectation
# that some row failed (or that raised) is validated again alone for those indices, which
# the memo keeps.
COUNTS_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": SAMPLE_IDS}
ROWS_FORMAT = {
    "result_format": "COMPLETE",
    "unexpected_index_column_names": [ROW_HASH],
    "partial_unexpected_count": SAMPLE_IDS,
    # GX would show a pandas query on a frame that only existed inside the run.
    "return_unexpected_index_query": False,
}


def clean(res) -> bool:
    """Whether a Great Expectations result saw no unexpected row and no error."""
    return bool(res.success) and not (res.result or {}).get("unexpected_count")


def column_label(kwargs: dict) -> str | None:
    """The column(s) an expectation checks, as dq_results names them."""
    pair = ",".join(c for c in (kwargs.get("column_A"), kwargs.get("column_B")) if c)
    return kwargs.get("column") or ",".join(kwargs.get("column_list", [])) or pair or None


class GxProject:
    """A Great Expectations file context and what was defined in it, kept for the process:
    a process that validates run after run (the warm runner of `paperlake serve`) opens
    the context and defines each suite once (about 0.6 s a run on the sample)."""

    open: dict[Path, GxProject] = {}

    def __init__(self, root: Path, define: bool = True):
        """Args:
        define: set the project up to define suites in (its datasource, no progress
            bars), which writes its configuration; False opens it as it is, to store
            results and build Data Docs only (a `DocsWorker`)."""
        _quiet_gx()
        import great_expectations as gx

        share_compiled_templates()
        self.gx = gx
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.context = gx.get_context(mode="file", project_root_dir=str(root))
        self.source = None
        if define:
            self.context.variables.progress_bars = {"globally": False}
            self.source = self.context.data_sources.add_or_update_pandas("paperlake")
        self.definitions: dict[str, tuple] = {}
        self.unpaged: set[str] = set()  # suites defined here whose Data Docs page is older

    @classmethod
    def at(cls, root: Path) -> GxProject:
        """The project under `root`: the one opened before while its files remain."""
        key = root.resolve()
        project = cls.open.get(key)
        if project is None or not (key / "gx" / "great_expectations.yml").exists():
            project = cls.open[key] = cls(root)
        return project

    def define(self, suite: Suite):
        from great_expectations.expectations.expectation_configuration import (
            ExpectationConfiguration,
        )

        context, gx = self.context, self.gx
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
        self.unpaged.add(suite.name)
        gx_suite = context.suites.add_or_update(
            gx.ExpectationSuite(name=suite.name, expectations=expectations)
        )
        return batch, gx_suite


class Validator:
    """A Great Expectations file context under warehouse/gx that runs suites on frames.

    Row-level expectations run in Great Expectations on the rows not checked before (all of
    them without a memo folder, or when a suite or a parameter changed); the outcome of the
    others comes from the memo. Table-level ones (uniqueness, row counts) are computed in
    DuckDB over the whole table. Either way each result counts every row of the table.
    """

    def __init__(self, root: Path, run_id: str, memo: Path | None = None):
        self.root = root
        self.run_id = run_id
        self.memo = memo
        self.results: list[pl.DataFrame] = []
        self.stored: list = []  # the keys of the suite results stored for the Data Docs
        # (table, result, validation time) of suite results to store before the Data Docs
        # are built: storing serialises each (about 10 ms a suite), so the thread that
        # builds the Data Docs does it (`store_results`).
        self.unstored: list[tuple[str, Any, datetime]] = []
        self._project: GxProject | None = None

    @property
    def context(self):
        """The file context, made when first needed: a run that checks no new row never
        imports Great Expectations."""
        if self._project is None:
            self._project = GxProject.at(self.root)
        return self._project.context

    def _definition(self, suite: Suite):
        """The batch definition and suite of `suite` in the context; made once a process."""
        project = self._project or GxProject.at(self.root)
        self._project = project
        key = json.dumps([suite.name, suite.id_columns, suite.expectations], sort_keys=True)
        if key not in project.definitions:
            project.definitions[key] = project.define(suite)
        return project.definitions[key]

    def validate(self, table: str, frame: pl.DataFrame, parameters: dict) -> pl.DataFrame:
        """Run the suite named `table` on `frame`; return its dq_results rows."""
        suite = Suite.load(table)
        unknown = sorted({e["type"] for e in suite.expectations} - ROW_LEVEL - TABLE_LEVEL)
        if unknown:
            raise ValueError(f"suite {table}: no way to run {', '.join(unknown)}")
        prepared = prepare(table, frame)
        memo = RowMemo.at(self.memo, table, list(suite.row_level().expectations), parameters)
        failing, fields = self._row_outcomes(suite, prepared, parameters, memo)
        rows = [
            self._row_result(suite, field, index, prepared, failing)
            for index, field in enumerate(fields)
        ]
        rows += [
            self._table_result(suite, e, prepared, parameters)
            for e in suite.expectations
            if e["type"] in TABLE_LEVEL
        ]
        out = pl.DataFrame(rows, schema=DQ_SCHEMA)
        self.results.append(out)
        return out

    def _row_outcomes(
        self,
        suite: Suite,
        prepared: pl.DataFrame,
        parameters: dict,
        memo: RowMemo,
    ) -> tuple[np.ndarray, list[dict]]:
        """Whether each row of `prepared` fails each row-level expectation (rows x
        expectations), and each expectation's fields. Rows the memo knows are not checked
        again."""
        # Found by set membership of the hashes: 1.07 million neighbour rows, 65,000 of
        # them fresh, in 0.2 s, where sorting them for binary searches and merging the
        # memo in order took 0.45 s.
        hashes = prepared.hash_rows()
        known, fields = memo.rows(), memo.fields()
        seen = hashes.is_in(known["row_hash"].implode())
        fresh = prepared.with_columns(hashes.alias(ROW_HASH)).filter(~seen)
        failed = known.filter(pl.col("failed").list.len() > 0)  # the few rows that failed
        checked = fresh.height or fields is None
        if checked:
            fields, failures = self._run_gx(suite.row_level(), fresh, parameters)
            added = failed_lists(fresh[ROW_HASH], failures)
            failed = pl.concat([failed, added.filter(pl.col("failed").list.len() > 0)])
        failed = failed.unique("row_hash", keep="first")
        # The memo keeps the current rows only: rewritten when rows came or went.
        if checked or hashes.filter(seen).n_unique() != known.height:
            current = hashes if hashes.n_unique() == len(hashes) else hashes.unique()
            bad = current.is_in(failed["row_hash"].implode())
            empty = pl.lit([], dtype=pl.List(pl.UInt16))
            rows = pl.concat([
                failed.filter(pl.col("row_hash").is_in(current.implode())),
                pl.DataFrame({"row_hash": current.filter(~bad)}).with_columns(failed=empty),
            ])  # fmt: skip
            memo.write(rows, fields)
        failing = np.zeros((len(hashes), len(fields)), dtype=bool)
        if failed.height:
            at = np.flatnonzero(hashes.is_in(failed["row_hash"].implode()).to_numpy())
            cells = (
                pl.DataFrame({"row_hash": hashes.gather(at), "at": at})
                .join(failed, on="row_hash")
                .explode("failed")
            )
            failing[cells["at"].to_numpy(), cells["failed"].to_numpy().astype(np.int64)] = True
        return failing, fields

    def _run_gx(
        self, suite: Suite, fresh: pl.DataFrame, parameters: dict
    ) -> tuple[list[dict], list[set[int]]]:
        """Run `suite` in Great Expectations on `fresh` (in batches): each expectation's
        fields and the row hashes that failed it."""
        whole, gx_suite = self._definition(suite)
        batches = [fresh] if fresh.height <= BATCH_ROWS else fresh.iter_slices(BATCH_ROWS)
        fields: list[dict] = []
        failures = [set() for _ in suite.expectations]
        with configurations_reused():
            for batch in batches:
                gx_batch = whole.get_batch(batch_parameters={"dataframe": batch.to_pandas()})
                result = gx_batch.validate(
                    gx_suite, expectation_parameters=parameters, result_format=COUNTS_FORMAT
                )
                # One time per batch, so that batches of one table never share a key.
                self.unstored.append((suite.name, result, datetime.now(UTC)))
                fields = []
                for index, expectation in enumerate(suite.expectations):
                    res = result_for(result.results, expectation)
                    if not clean(res):  # which rows failed: this expectation again, for them
                        rows = gx_batch.validate(
                            res.expectation_config.to_domain_obj(), result_format=ROWS_FORMAT
                        )
                        failures[index].update(
                            int(item[ROW_HASH])
                            for item in (rows.result or {}).get("unexpected_index_list") or []
                            if isinstance(item, dict)
                        )
                    fields.append(self._fields(res))
        return fields, failures

    @staticmethod
    def _fields(res) -> dict:
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

    def _row_result(
        self, suite: Suite, field: dict, index: int, prepared: pl.DataFrame, failing: np.ndarray
    ) -> dict:
        """One row-level expectation's result over every row, from each row's outcome."""
        mask = pl.Series(failing[:, index])
        unexpected = int(mask.sum())
        column = field["column"]
        if field["expectation"] == "expect_column_values_to_not_be_null" or column is None:
            considered = prepared.height
        else:  # as Great Expectations: null values are not counted against `mostly`
            considered = prepared.height - prepared[column].null_count()
        mostly = field["mostly"]
        if mostly is None:
            success = unexpected == 0
        else:
            success = considered == 0 or (considered - unexpected) / considered >= mostly
        return {
            "run_id": self.run_id,
            "suite": suite.name,
            **{k: field[k] for k in ("expectation", "column_name", "kwargs", "severity")},
            "blocking": field["severity"] == "critical",
            "success": success,
            "element_count": prepared.height,
            "unexpected_count": unexpected,
            "unexpected_ids": row_ids(prepared.filter(mask), suite.id_columns),
            "observed_value": None,
        }

    def _table_result(
        self, suite: Suite, expectation: dict, prepared: pl.DataFrame, parameters: dict
    ) -> dict:
        """A table-level expectation over the whole table, computed in DuckDB."""
        kwargs = resolve(expectation["kwargs"], parameters)
        severity = expectation.get("severity", "critical")
        row = {
            "run_id": self.run_id,
            "suite": suite.name,
            "expectation": expectation["type"],
            "column_name": column_label(kwargs),
            "kwargs": json.dumps(kwargs, sort_keys=True, default=str),
            "severity": severity,
            "blocking": severity == "critical",
        }
        if expectation["type"] == "expect_table_row_count_to_equal":
            return row | {
                "success": prepared.height == kwargs["value"],
                "element_count": None,
                "unexpected_count": None,
                "unexpected_ids": [],
                "observed_value": json.dumps(prepared.height),
            }
        columns = kwargs.get("column_list") or [kwargs["column"]]
        duplicated = duplicate_rows(prepared, columns)
        return row | {
            "success": duplicated.height == 0,
            "element_count": prepared.height,
            "unexpected_count": duplicated.height,
            "unexpected_ids": row_ids(duplicated, suite.id_columns),
            "observed_value": None,
        }

    def store_results(self) -> None:
        """Store the suite results not stored yet (see `_store`)."""
        while self.unstored:
            self._store(*self.unstored.pop(0))

    def _store(self, table: str, result, time: datetime) -> None:
        """Keep a suite result for the Data Docs under the run's id and the table's name.

        Stored here rather than by a ValidationDefinition run, which names every result
        `__none__` and a dataframe batch's asset None, and would have to be stored twice.
        """
        from great_expectations.core.run_identifier import RunIdentifier
        from great_expectations.data_context.types.resource_identifiers import (
            ExpectationSuiteIdentifier,
            ValidationResultIdentifier,
        )

        run = RunIdentifier(run_name=self.run_id, run_time=time)
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
        self.stored.append(key)

    @property
    def ran_gx(self) -> bool:
        """Whether this validator has any suite result, stored or to store."""
        return bool(self.stored or self.unstored)

    @property
    def site(self) -> Path:
        """The local Data Docs site."""
        return self.root / "gx" / "uncommitted" / "data_docs" / "local_site"

    def page_suites(self) -> None:
        """Render now the Data Docs page of every suite defined anew in this process, where
        the site exists: a later build renders only its run's results and the index."""
        from great_expectations.data_context.types.resource_identifiers import (
            ExpectationSuiteIdentifier,
        )

        project = self._project
        if project is None or not project.unpaged or not (self.site / "index.html").exists():
            return
        pages = [ExpectationSuiteIdentifier(name=name) for name in sorted(project.unpaged)]
        self.context.build_data_docs(resource_identifiers=pages)
        project.unpaged.clear()

    def build_docs(self) -> Path | None:
        """Rebuild the HTML Data Docs over the latest runs; returns the index page.

        A run that stored no result leaves the Data Docs as they are. Results not stored
        yet are stored first.
        """
        self.store_results()
        index = self.site / "index.html"
        if not self.ran_gx and index.exists():
            return index
        self.prune_results()
        if index.exists():  # the pages of this run's results and suites, and the index
            from great_expectations.data_context.types.resource_identifiers import (
                ExpectationSuiteIdentifier,
            )

            # A suite's page changes only with the suite: made where it is missing or the
            # suite was defined anew in this process.
            suites = {key.expectation_suite_identifier.name for key in self.stored}
            paged = {p.stem for p in (self.site / "expectations").glob("*.html")}
            redo = {s for s in suites if s in self._project.unpaged or s not in paged}
            self._project.unpaged -= redo
            pages = [*self.stored, *(ExpectationSuiteIdentifier(name=s) for s in sorted(redo))]
            self.context.build_data_docs(resource_identifiers=pages)
        else:
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
                # The result, and its page (the Data Docs are built only for new results).
                page = self.site / "validations" / old.relative_to(root)
                for folder in (old, page):
                    shutil.rmtree(folder, ignore_errors=True)
                    if folder.parent.is_dir() and not any(folder.parent.iterdir()):
                        folder.parent.rmdir()
                removed += 1
        return removed


class DocsWorker:
    """A process that stores suite results and builds the Data Docs of one project
    (`Validator.build_docs`), for a process that runs flow after flow (`paperlake serve`,
    `serving`). The Data Docs are about 0.2 s of Python a +1 run on the sample, which held
    the serving process's interpreter while the version was planned and committed beside
    them; handed +1 runs, paired with and without the worker, 10 rounds each: median
    0.06 s (mean 0.10 s) shorter.

    It starts with `spawn`: a fork of a process running DuckDB's, OpenVINO's and Prefect's
    threads could inherit a lock one of them held. It imports Great Expectations at once
    (about 2 s, while the serving process warms up), and opens the project without writing
    its configuration (`GxProject(define=False)`) when told to (`open_project`) or at its
    first build: it never races the serving process, which makes the project and defines
    the suites; a build runs only once the run's suites are done.
    """

    running: dict[Path, DocsWorker] = {}

    def __init__(self, root: Path):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.root = root
        self.pool = ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn"), initializer=_start_docs_worker
        )
        started = set(multiprocessing.active_children())
        self.pool.submit(int)  # start it now
        self.processes = [p for p in multiprocessing.active_children() if p not in started]

    def open_project(self) -> None:
        """Have the worker open the project now (once the serving process set it up)."""
        from concurrent.futures import BrokenExecutor

        with contextlib.suppress(BrokenExecutor):  # a worker that died: runs build their own
            self.pool.submit(_open_for_docs, self.root)

    @classmethod
    @contextlib.contextmanager
    def serving(cls, root: Path):
        """Within it, `write_data_docs` of the project under `root` goes to a worker."""
        key = root.resolve()
        cls.running[key] = worker = cls(root)
        try:
            yield worker
        finally:
            cls.running.pop(key, None)
            worker.stop()
            stop_resource_tracker()

    def stop(self) -> None:
        """End the worker process now: waiting for it to finish importing Great Expectations
        at its start, or to exit with it imported, held a stopping `serve` for many seconds
        on a busy machine. It holds nothing to clean up (SIGKILL also ends it where it gets
        no CPU at all), and a build cut short is made whole by the next run's."""
        for process in self.processes:
            process.kill()
            process.join()
        self.pool.shutdown(wait=True, cancel_futures=True)

    @classmethod
    def of(cls, root: Path) -> DocsWorker | None:
        return cls.running.get(root.resolve())

    def build(self, run_id: str, suite_results: list) -> str | None:
        """Store `suite_results` and build their pages and the index; the index page."""
        project = GxProject.open.get(self.root.resolve())
        unpaged = set(project.unpaged) if project else set()  # suites defined anew here
        index = self.pool.submit(_build_docs, self.root, run_id, suite_results, unpaged).result()
        if project:
            project.unpaged -= unpaged
        return index


def stop_resource_tracker() -> None:
    """Stop multiprocessing's resource tracker, which the worker's start launched, and wait
    for it. Left alone, it ends only after this process has exited: `serve`'s test found it
    still running just after serve's exit (gone 0.1 s later). CPython has no public call for
    this; `_stop` closes the tracker's pipe and waits for it, and a later start launches a
    new one (`ensure_running`)."""
    from multiprocessing import resource_tracker

    stop = getattr(resource_tracker._resource_tracker, "_stop", None)
    if stop is not None:
        stop()


def _start_docs_worker() -> None:
    """A `DocsWorker`'s start: Great Expectations imported. Ctrl-C reaches the serving
    process, which stops the worker after its build."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _quiet_gx()
    import great_expectations  # noqa: F401

    share_compiled_templates()


def _open_for_docs(root: Path) -> None:
    """In a `DocsWorker`: the project opened once, for every build."""
    if root.resolve() not in GxProject.open:
        GxProject.open[root.resolve()] = GxProject(root, define=False)


def _build_docs(root: Path, run_id: str, suite_results: list, unpaged: set[str]) -> str | None:
    """A `DocsWorker`'s build, in its process."""
    _open_for_docs(root)
    validator = Validator(root, run_id)
    validator.unstored = list(suite_results)
    GxProject.at(root).unpaged |= unpaged
    index = validator.build_docs()
    return str(index) if index else None


def warm_up(root: Path | None = None) -> None:
    """Import Great Expectations now (about 2 s), in a process that will validate often;
    with `root`, also open the project there, define every suite in it and render the
    suites' Data Docs pages, as the first run of the process would (about 1 s)."""
    _quiet_gx()
    import great_expectations  # noqa: F401

    if root is not None:
        validator = Validator(root, "warm-up")
        for name in suite_names():
            validator._definition(Suite.load(name).row_level())
        validator.page_suites()


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


def row_ids(rows: pl.DataFrame, id_columns: tuple[str, ...]) -> list[str]:
    """The keys of the first SAMPLE_IDS rows, sorted, as dq_results lists failing rows."""
    keys = rows.head(SAMPLE_IDS).select(
        pl.concat_str([pl.col(c).cast(pl.String) for c in id_columns], separator="/")
    )
    return sorted(dict.fromkeys(keys.to_series().drop_nulls().to_list()))


@lru_cache(maxsize=1)
def scratch_database():
    """An in-memory DuckDB kept for the process: each table-level check runs on a cursor
    of it (its own connection, in about 1 ms where a new database takes about 10 ms)."""
    import duckdb

    return duckdb.connect(config={"threads": 1})


def failed_lists(hashes: pl.Series, failures: list[set[int]]) -> pl.DataFrame:
    """row_hash and failed (the indices of the expectations whose failing rows hold that
    hash, ascending) for each of `hashes`: built from the few failures, where a list made
    in Python for every row took 0.7 s for 75,000 rows."""
    schema = {"row_hash": pl.UInt64, "failed": pl.List(pl.UInt16)}
    pairs = pl.DataFrame(
        [(h, i) for i, bad in enumerate(failures) for h in bad],
        schema={"row_hash": pl.UInt64, "index": pl.UInt16},
        orient="row",
    )
    lists = pairs.group_by("row_hash").agg(pl.col("index").unique().sort().alias("failed"))
    found = pl.DataFrame({"row_hash": hashes}, schema={"row_hash": pl.UInt64}).join(
        lists, on="row_hash", how="left", maintain_order="left"
    )
    empty = pl.lit([], dtype=pl.List(pl.UInt16))
    return found.with_columns(pl.col("failed").fill_null(empty)).cast(schema)


def duplicate_rows(frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """Rows of `frame` whose values in `columns` (not all missing) occur more than once,
    in table order (sql/dq/duplicate_keys.sql, in DuckDB)."""
    keys = frame.select(columns).with_row_index("row_number")
    present = keys.filter(pl.any_horizontal(pl.col(columns).is_not_null()))
    # Keys whose hashes all differ differ: 0.04 s for 1.1 million neighbour rows, where
    # DuckDB's count of each key takes 0.2-0.4 s. Only a repeated hash needs the count.
    if present.select(pl.struct(columns).hash()).to_series().n_unique() == present.height:
        return frame.clear()
    con = scratch_database().cursor()
    try:
        con.register("checked", present.to_arrow())
        names = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
        sql = read_sql("dq/duplicate_keys").replace("__columns__", names)
        numbers = [r[0] for r in con.execute(sql).fetchall()]
    finally:
        con.close()
    return frame[numbers]


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


def severity_meta(severity: str) -> dict:
    """An expectation's meta: its paperlake severity and whether a failure blocks the publish."""
    return {"paperlake": {"severity": severity, "blocks_publish": severity == "critical"}}


def severity_note(severity: str) -> str:
    """An expectation's note, shown on its suite's Data Docs page."""
    if severity == "critical":
        return "paperlake severity: critical. A failure blocks the publish."
    return f"paperlake severity: {severity}. A failure is reported; the run still publishes."
