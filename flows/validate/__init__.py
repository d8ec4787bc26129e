"""Validate: run the Great Expectations suites in expectations/ against staged tables.

Suites are JSON files, one per table. Severity `critical` marks a blocking check: a
failure stops the publish. Results become dq_results rows and HTML Data Docs, where each
result is named by the paperlake run and its table and each expectation carries its
severity; the Data Docs load their styles from CDNs, so the data-quality page (page/)
is what reads offline.

Modules:
    suites      the suite files, what each expectation checks, the frame a suite checks
    validator   a table's suite run on a frame: its dq_results rows
    checks      dq_results rows: row-level results, table-level checks in DuckDB
    row_memo    which rows were checked before and which failed
    gx          Great Expectations: the project, row-level suites run, results stored
    docs        the Data Docs of a run's results
    outcome     a run's outcome and its blocking failures
    headlines   a failed check in words ("papers: 4 papers have fewer words than 20")
    references  the references between tables, checked as blocking rows
    page/       the data-quality page of a version or of a stopped run
"""

from __future__ import annotations

from flows.validate.checks import DQ_SCHEMA
from flows.validate.docs import build_data_docs
from flows.validate.outcome import (
    DataQualityError,
    Outcome,
    blocking_failures,
    outcome,
)
from flows.validate.page import (
    build_page,
    build_page_while_publishing,
    latest_trend,
    link_data_docs,
    page_as_json,
    page_path,
    save_page,
    write_run_page,
    write_version_page,
)
from flows.validate.references import check_references
from flows.validate.suites import Suite, prepare, suite_names
from flows.validate.validator import Validator, warm_up

__all__ = [
    "DQ_SCHEMA",
    "DataQualityError",
    "Outcome",
    "Suite",
    "Validator",
    "blocking_failures",
    "build_data_docs",
    "build_page",
    "build_page_while_publishing",
    "check_references",
    "latest_trend",
    "link_data_docs",
    "outcome",
    "page_as_json",
    "page_path",
    "prepare",
    "save_page",
    "suite_names",
    "warm_up",
    "write_run_page",
    "write_version_page",
]
