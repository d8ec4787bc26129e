"""The paperlake command line: run, validate, search, versions, query, ...

Commands import what they drive (DuckDB, torch, Prefect) when they run, after the
environment is set: `main()` sets it for the console script and `python -m flows.cli`, the
app's callback for anything that invokes `app` itself (typer's test runner).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from flows.cli import doctor, explore, export, pages, run, versions, web
from flows.cli.output import fail, out
from flows.cli.run import print_summary
from flows.core import damage
from flows.core.settings import configure_environment, package_version

__all__ = ["app", "main", "print_summary"]

app = typer.Typer(
    help="Raw dumps of paper abstracts into a versioned, quality-checked DuckLake warehouse.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def show_version(value: bool) -> None:
    if value:
        out.print(f"paperlake {package_version('paperlake')}", highlight=False)
        raise typer.Exit()


@app.callback()
def root(
    show: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=show_version,
            is_eager=True,
            help="Print paperlake's version and exit (a command's --version N picks a "
            "data version).",
        ),
    ] = False,
) -> None:
    configure_environment()


def reports_damage(command: Callable[..., Any]) -> Callable[..., Any]:
    """Run `command`; a DuckDB error that tells of a damaged warehouse (a data file gone,
    a damaged catalog: `damage.told`) ends it with that one line, not a traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except Exception as exc:
            duckdb = sys.modules.get("duckdb")  # only a command that loaded it can meet it
            told = damage.told(exc) if duckdb and isinstance(exc, duckdb.Error) else None
            if told is None:
                raise
            fail(str(told))

    return wrapper


for command, name in (
    (run.run, None),
    (run.validate_raw, "validate"),
    (explore.search, None),
    (explore.similar, None),
    (versions.versions, None),
    (explore.query, None),
    (versions.diff, None),
    (versions.checksum, None),
    (versions.tables, None),
    (versions.compact, None),
    (export.export, None),
    (export.duckdb_shell, "duckdb"),
    (doctor.doctor, None),
    (pages.report, None),
    (web.explore, None),
    (run.serve, None),
):
    app.command(name=name)(reports_damage(command))
app.command(name="dq", help=pages.DQ_HELP)(reports_damage(pages.data_quality))


def main() -> None:
    """The console entry point: set the environment, run the command."""
    configure_environment()
    app()
