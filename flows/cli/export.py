"""Commands that hand a version to other tools: export (a table as a file) and duckdb (a
duckdb shell on the warehouse, or the SQL that opens it in any DuckDB)."""

from __future__ import annotations

import signal
import subprocess
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.options import VersionOpt, setting_options
from flows.cli.output import fail, out
from flows.core.errors import WarehouseError
from flows.core.settings import Settings
from flows.core.stopping import stops_on_signals


# flows.read's FORMATS, spelled here: commands import flows.read only when they run.
class ExportFormat(StrEnum):
    parquet = "parquet"
    csv = "csv"
    jsonl = "jsonl"


@stops_on_signals(note="nothing was written: an export writes its file whole")
@setting_options("warehouse", "catalog", "data_path")
def export(
    table: Annotated[str, typer.Argument(help="A table of the version (`paperlake tables`).")],
    to: Annotated[Path, typer.Option("--to", help="The file to write.")],
    fmt: Annotated[
        ExportFormat | None,
        typer.Option(
            "--format", help="parquet, csv or jsonl (default: from --to's suffix, else parquet)."
        ),
    ] = None,
    version: VersionOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a file that is there.")] = False,
    *,
    settings: Settings,
) -> None:
    """Write a version's table to a file for other tools.

    Parquet keeps every type: lists, structs, and vectors (the embeddings, FLOAT[384]) as
    fixed-size arrays; CSV writes lists and structs as JSON text; JSON Lines writes one
    object per row, lists as arrays.
    """
    import duckdb

    from flows.core.damage import told
    from flows.core.lake import open_lake, published_versions
    from flows.read import export_format, export_table

    chosen = export_format(to, fmt and fmt.value)
    try:
        with open_lake(settings, version, extensions=()) as con:
            rows = export_table(con, table, to, chosen, force)
            number = published_versions(con)[-1] if version is None else version
    except FileExistsError:
        fail(f"{to} exists already: pass --force to replace it")
    except (WarehouseError, IsADirectoryError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {to}: {exc.strerror or exc}")
    except duckdb.IOException as exc:  # a data file gone, or the file cannot be written
        fail(str(told(exc) or f"cannot write {to}: {exc}"))
    out.print(f"{rows} rows of {table} (version {number}) written to {to} as {chosen}")


@setting_options("warehouse", "catalog", "data_path")
def duckdb_shell(
    print_setup: Annotated[
        bool,
        typer.Option(
            "--print-setup",
            help="Print the SQL that opens the version in any DuckDB 1.5.5 (the duckdb CLI, "
            "Python's duckdb) instead of starting a shell.",
        ),
    ] = False,
    command: Annotated[
        str | None, typer.Option("-c", help="Run this SQL and exit, instead of a shell.")
    ] = None,
    version: VersionOpt = None,
    *,
    settings: Settings,
) -> None:
    """The duckdb shell with a version attached read-only as `lake` (its tables in scope),
    the packaged extensions loaded (ducklake, fts, vss) and nothing downloaded.

    The shell reads its own copy of a DuckDB-file catalog, so runs publish while it is
    open; it reads the version that was current when it started.
    """
    from flows.read import duckdb_setup, reader_of

    try:
        if print_setup:
            sys.stdout.write(duckdb_setup(settings, version))
            return
        copy = reader_of(settings)
    except WarehouseError as exc:
        fail(str(exc))
    try:
        setup = duckdb_setup(settings if copy is None else copy.reading, version)
        code = run_shell(setup, command)
    except WarehouseError as exc:
        fail(str(exc))
    finally:
        if copy is not None:
            copy.close()
    raise typer.Exit(code)


def shell_binary() -> Path:
    """The duckdb CLI that the duckdb-cli package installs."""
    from importlib.resources import files

    try:
        binary = Path(str(files("duckdb_cli") / "duckdb"))
    except ModuleNotFoundError:
        binary = None
    if binary is None or not binary.is_file():
        fail(
            "the duckdb CLI is not installed (pip install duckdb-cli==1.5.5); or paste "
            "`paperlake duckdb --print-setup` into any DuckDB 1.5.5"
        )
    return binary


def run_shell(setup: str, command: str | None) -> int:
    """Run the duckdb CLI with `setup` done first; its exit status.

    Ctrl-C belongs to the shell (it stops a query there), so this process lets it pass
    while the shell runs; SIGTERM ends the shell, then this command.
    """
    arguments = [str(shell_binary()), "-cmd", setup]
    if command is not None:
        arguments += ["-c", command]
    shell = subprocess.Popen(arguments)

    def end_shell(signum: int, frame: object) -> None:
        shell.terminate()

    # A handler, not SIG_IGN: the shell starts with the default action, as an ignored
    # signal would stay ignored across exec.
    before = {s: signal.signal(s, h) for s, h in ((signal.SIGINT, lambda *_: None),
                                                  (signal.SIGTERM, end_shell))}  # fmt: skip
    try:
        code = shell.wait()
        return 128 - code if code < 0 else code  # ended by a signal: 128 + its number
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
