"""Commands that write a version's offline pages: report and dq (data quality)."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.options import VersionOpt, setting_options
from flows.cli.output import fail, out
from flows.core.errors import WarehouseError
from flows.core.settings import Settings


class PageFormat(StrEnum):
    html = "html"
    json = "json"


@setting_options("warehouse", "catalog", "data_path")
def report(
    version: VersionOpt = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="HTML file (default: warehouse/report-v<N>.html)."),
    ] = None,
    *,
    settings: Settings,
) -> None:
    """Write a self-contained HTML report of a version: topics, venues, quality, changes."""
    from flows.read import write_report

    try:
        path = write_report(settings, version, output)
    except WarehouseError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write the report: {exc}")
    out.print(str(path), highlight=False)


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


@setting_options("warehouse", "catalog", "data_path")
def data_quality(
    version: VersionOpt = None,
    fmt: Annotated[
        PageFormat, typer.Option("--format", help="html (a page; prints its path) or json.")
    ] = PageFormat.html,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="HTML file (default: warehouse/dq-v<N>.html)."),
    ] = None,
    *,
    settings: Settings,
) -> None:
    """Write the data-quality page of a version (see DQ_HELP); print its path."""
    from flows import validate

    try:
        if fmt == PageFormat.json:
            page = validate.build_page(settings, version)
            validate.link_data_docs(page, settings)
            sys.stdout.write(json.dumps(validate.page_as_json(page), indent=2, default=str) + "\n")
            return
        path = validate.write_version_page(settings, version, output)
    except WarehouseError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write the page: {exc}")
    out.print(str(path), highlight=False)
