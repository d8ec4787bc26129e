"""Data quality: one self-contained page per version, built from dq_results and its tables.

The page opens with the run's outcome in the words `paperlake run` printed
(flows/core/wording.py), then lists every suite and expectation with its severity, its
outcome, the observed value against the threshold, and the failing rows as a person knows
them: title, file:line and the offending value (rows.py). It folds in the per-file ingest
figures and a trend over recent versions (trend.py). Figures come from sql/dq/
(gather.py), the page from flows/templates/dq.html.j2 (render.py); CSS, SVG and JS are
inline, so it opens offline. `page_as_json` gives the same content for machines; page.py
holds the page's dataclasses and its wording of checks and values.
"""

from flows.validate.page.gather import (
    build_page,
    build_page_while_publishing,
    build_run_page,
    gather,
)
from flows.validate.page.page import (
    Check,
    FailingRow,
    Page,
    SuiteReport,
    SuiteTrend,
    TrendPoint,
    expectation_key,
    number,
    observed,
    short_value,
    status_of,
    threshold,
)
from flows.validate.page.render import (
    DATA_DOCS_INDEX,
    link_data_docs,
    page_as_json,
    page_path,
    render_page,
    save_page,
    write_run_page,
    write_version_page,
)
from flows.validate.page.trend import TREND_VERSIONS, latest_trend, trend_of

__all__ = [
    "DATA_DOCS_INDEX",
    "TREND_VERSIONS",
    "Check",
    "FailingRow",
    "Page",
    "SuiteReport",
    "SuiteTrend",
    "TrendPoint",
    "build_page",
    "build_page_while_publishing",
    "build_run_page",
    "expectation_key",
    "gather",
    "latest_trend",
    "link_data_docs",
    "number",
    "observed",
    "page_as_json",
    "page_path",
    "render_page",
    "save_page",
    "short_value",
    "status_of",
    "threshold",
    "trend_of",
    "write_run_page",
    "write_version_page",
]
