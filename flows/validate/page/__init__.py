"""Data quality: one self-contained page per version, built from dq_results and its tables.

The page opens with the run's outcome in the words `paperlake run` printed
(flows/core/wording.py), then lists every suite and expectation with its severity, its
outcome, the observed value against the threshold, and the failing rows as a person knows
them: title, file:line and the offending value. It folds in the per-file ingest figures
and a trend over recent versions. Figures come from sql/dq/ (gather.py), the page from
flows/templates/dq.html.j2 (render.py); CSS, SVG and JS are inline, so it opens offline.
`as_json` gives the same content for machines; page.py holds the page's dataclasses and
its wording of checks and values.
"""

from flows.validate.page.gather import (
    TREND_VERSIONS,
    build,
    build_for_run,
    build_while_publishing,
    gather,
    latest_trend,
    trend_of,
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
    as_json,
    default_output,
    link_data_docs,
    render,
    write,
    write_page,
    write_run_page,
)

__all__ = [
    "DATA_DOCS_INDEX",
    "TREND_VERSIONS",
    "Check",
    "FailingRow",
    "Page",
    "SuiteReport",
    "SuiteTrend",
    "TrendPoint",
    "as_json",
    "build",
    "build_for_run",
    "build_while_publishing",
    "default_output",
    "expectation_key",
    "gather",
    "latest_trend",
    "link_data_docs",
    "number",
    "observed",
    "render",
    "short_value",
    "status_of",
    "threshold",
    "trend_of",
    "write",
    "write_page",
    "write_run_page",
]
