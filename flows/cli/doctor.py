"""paperlake doctor: check a warehouse, and with --repair mend what can be mended."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli.options import FormatOpt, MaxRowsOpt, setting_options
from flows.cli.output import MAX_ROWS, Format, err, fail, out, print_frame
from flows.core.errors import WarehouseError
from flows.core.settings import Settings

CARRIED_TOPICS = ("topics", "paper_topics")  # the tables a run carries its topics over from


@setting_options("warehouse", "catalog", "data_path")
def doctor(
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Drop damaged caches, salvage tables whose files are damaged and rebuild "
            "the latest version from the raw files.",
        ),
    ] = False,
    raw: Annotated[
        list[Path] | None,
        typer.Option(
            "--raw",
            help="Raw file or folder a repair rebuilds from (repeatable; default: those the "
            "latest version was built from).",
        ),
    ] = None,
    fmt: FormatOpt = Format.table,
    max_rows: MaxRowsOpt = MAX_ROWS,
    *,
    settings: Settings,
) -> None:
    """Check the catalog, every data file a version reads and every cache file; exit 1
    while anything is damaged."""
    from flows.publish import HISTORY_TABLES, check_warehouse, repair_caches, salvage_tables

    up = check_warehouse(settings)
    show(up, fmt, max_rows)
    if not up.mendable():
        say_lost(up)
        return
    if not repair:
        err.print("run `paperlake doctor --repair` to mend what can be mended")
        raise typer.Exit(1)
    if not up.readable:
        fail("the catalog cannot be read: restore it from a backup (doctor cannot rebuild it)")
    for path in repair_caches(up):
        out.print(f"dropped {path}")
    salvaged = salvage_tables(settings, up)
    for table, (kept, dropped) in salvaged.items():
        out.print(f"salvaged {table}: {kept} rows kept from its readable files, {dropped} dropped")
        if table in HISTORY_TABLES and dropped:
            out.print(f"lost: {dropped} rows of {table}, a record of past runs no rebuild makes")
    if up.damaged_tables():
        # Topics a run carries over: a salvage that lost some would drop live topics.
        refit = any(dropped for t, (_, dropped) in salvaged.items() if t in CARRIED_TOPICS)
        rebuild(settings, raw, refit)
    after = check_warehouse(settings)
    if after.mendable():
        show(after, fmt, max_rows)
        fail("damage remains (listed above)")
    say_lost(after)
    out.print(f"repaired: the latest version (version {after.latest}) reads whole")


def say_lost(up) -> None:
    """What no repair brings back: each table at the earlier versions whose files are gone."""
    for f in up.lost():
        versions = ", ".join(map(str, f.versions))
        out.print(f"lost: {f.table} at version {versions} cannot be read ({f.path}: {f.problem})")


def show(up, fmt: Format, max_rows: int) -> None:
    """The findings as rows, or one line saying all is well."""
    import polars as pl

    if not up.findings:
        out.print(
            f"healthy: the catalog, {up.data_files} data files of its versions and "
            f"{up.cache_files} cache files checked"
        )
        return
    lost = up.lost()
    rows = [
        {
            "status": "lost" if f in lost else "damaged",
            "kind": f.kind,
            "table": f.table,
            "versions": ", ".join(map(str, f.versions)) or None,
            "problem": f.problem,
            "path": f.path,
        }
        for f in up.findings
    ]
    print_frame(pl.DataFrame(rows), fmt, max_rows)


def rebuild(settings: Settings, raw: list[Path] | None, refit: bool = False) -> None:
    """A forced run of the latest version's settings (its raw files, or `raw`); with
    `refit`, topics fit afresh rather than carried over from what a salvage left."""
    from flows.cli.run import flow_parameters, print_summary
    from flows.pipeline import run_here
    from flows.publish import latest_config
    from flows.serve import run_api
    from flows.validate import DataQualityError

    config = latest_config(settings)
    known = set(Settings.model_fields)
    given = {k: v for k, v in config.items() if k in known and k not in ("warehouse",)}
    given |= {"catalog": settings.catalog, "data_path": settings.data_path}
    if raw:
        given["raw"] = raw
    if refit:
        given["refit_topics"] = True
        out.print("topics lost rows in the salvage: they are fit afresh")
    again = Settings(warehouse=settings.warehouse, **given)
    missing = [str(p) for p in again.raw if not Path(p).exists()]
    if missing:
        fail(f"cannot rebuild: raw input {', '.join(missing)} is gone; give --raw")
    out.print(f"rebuilding the latest version from {', '.join(map(str, again.raw))}")
    try:
        with run_api(again, while_starting=lambda: None):
            summary = run_here(again, flow_parameters(again) | {"force": True})
    except (DataQualityError, WarehouseError) as exc:
        fail(f"the rebuild stopped: {exc}")
    print_summary(summary)
