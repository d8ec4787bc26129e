"""Run a table's suite on a frame: its dq_results rows, every row counted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from flows.core.held import IN_FRAME, Texts
from flows.validate.checks import DQ_SCHEMA, failed_lists, row_result, table_result
from flows.validate.gx import GxProject, RowChecks, SuiteResult, run_suite
from flows.validate.row_memo import RowMemo
from flows.validate.suites import ROW_HASH, ROW_LEVEL, TABLE_LEVEL, Suite, prepare, suite_names


class Validator:
    """Runs suites on frames, with the Great Expectations file context under `root`.

    Row-level expectations run in Great Expectations on the rows not checked before (all of
    them without a memo folder, or when a suite or a parameter changed); the outcome of the
    others comes from the memo. Table-level ones (uniqueness, row counts) are computed in
    DuckDB over the whole table. Either way each result counts every row of the table.
    """

    def __init__(self, root: Path, run_id: str, memo: Path | None = None, texts: Texts = IN_FRAME):
        """Args:
        texts: where the texts of frames that hold them back (flows/core/held.py) are
            read back, for the rows checked now.
        """
        self.root = root
        self.run_id = run_id
        self.memo = memo
        self.texts = texts
        self.results: list[pl.DataFrame] = []
        # Suite results to store for the Data Docs (docs.py), which serialises
        # each: done in the Data Docs' thread, not here.
        self.unstored: list[SuiteResult] = []
        self._project: GxProject | None = None

    @property
    def project(self) -> GxProject:
        """The Great Expectations project, opened when first needed: a run that checks no
        new row never imports Great Expectations."""
        if self._project is None:
            self._project = GxProject.at(self.root)
        return self._project

    @property
    def context(self):
        """The project's file context."""
        return self.project.context

    @property
    def ran_gx(self) -> bool:
        """Whether this validator ran Great Expectations on any row."""
        return bool(self.unstored)

    def validate(self, table: str, frame: pl.DataFrame, parameters: dict) -> pl.DataFrame:
        """Run the suite named `table` on `frame`; return its dq_results rows."""
        suite = Suite.load(table)
        unknown = sorted({e["type"] for e in suite.expectations} - ROW_LEVEL - TABLE_LEVEL)
        if unknown:
            raise ValueError(f"suite {table}: no way to run {', '.join(unknown)}")
        prepared = prepare(table, frame)
        memo = RowMemo.at(self.memo, table, list(suite.row_level().expectations), parameters)
        failing, fields = self.row_outcomes(suite, prepared, parameters, memo)
        rows = [
            row_result(self.run_id, suite, field, failing[:, index], prepared)
            for index, field in enumerate(fields)
        ]
        rows += [
            table_result(self.run_id, suite, e, prepared, parameters)
            for e in suite.expectations
            if e["type"] in TABLE_LEVEL
        ]
        out = pl.DataFrame(rows, schema=DQ_SCHEMA)
        self.results.append(out)
        return out

    def row_outcomes(
        self, suite: Suite, prepared: pl.DataFrame, parameters: dict, memo: RowMemo
    ) -> tuple[np.ndarray, list[dict]]:
        """Whether each row of `prepared` fails each row-level expectation (rows x
        expectations), and each expectation's fields. Rows the memo knows are not checked
        again."""
        # Found by set membership of the hashes, cheaper than sorting them for binary
        # searches and merging the memo in order.
        hashes = prepared.hash_rows()
        known, fields = memo.rows(), memo.fields()
        seen = hashes.is_in(known["row_hash"].implode())
        fresh = prepared.with_columns(hashes.alias(ROW_HASH)).filter(~seen)
        failed = known.filter(pl.col("failed").list.len() > 0)  # the few rows that failed
        checked = fresh.height or fields is None
        if checked:
            found = self.run_gx(suite.row_level(), self.texts.filled(fresh), parameters)
            fields = found.fields
            added = failed_lists(fresh[ROW_HASH], found.failures)
            failed = pl.concat([failed, added.filter(pl.col("failed").list.len() > 0)])
        failed = failed.unique("row_hash", keep="first")
        # The memo keeps the current rows only: rewritten when rows came or went.
        if checked or hashes.filter(seen).n_unique() != known.height:
            memo.write(current_rows(hashes, failed), fields)
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

    def run_gx(self, suite: Suite, fresh: pl.DataFrame, parameters: dict) -> RowChecks:
        """Run the row-level `suite` in Great Expectations on `fresh`; its suite results
        wait to be stored for the Data Docs."""

        found = run_suite(self.project, suite, fresh, parameters)
        self.unstored.extend(found.results)
        return found


def current_rows(hashes: pl.Series, failed: pl.DataFrame) -> pl.DataFrame:
    """The memo's rows: each of `hashes` once, with the expectations it failed (`failed`)."""
    current = hashes if hashes.n_unique() == len(hashes) else hashes.unique()
    bad = current.is_in(failed["row_hash"].implode())
    empty = pl.lit([], dtype=pl.List(pl.UInt16))
    return pl.concat([
        failed.filter(pl.col("row_hash").is_in(current.implode())),
        pl.DataFrame({"row_hash": current.filter(~bad)}).with_columns(failed=empty),
    ])  # fmt: skip


def warm_up(root: Path | None = None) -> None:
    """Import Great Expectations now, in a process that will validate often; with `root`,
    also open the project there, define every suite in it and render the suites' Data
    Docs pages, as the first run of the process would."""

    if root is not None:
        project = GxProject.at(root)
        for name in suite_names():
            project.definition(Suite.load(name).row_level())
        project.page_suites(suite_names())
