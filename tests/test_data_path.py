"""A catalog owns only its files: shared data paths, lost catalogs, files killed runs left."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
from typer.testing import CliRunner

from flows import publish
from flows.cli import app
from flows.core import data_path
from flows.core.errors import CatalogLost, DataPathTaken
from flows.core.lake import LAKE, attach, connect
from flows.core.settings import Settings
from flows.pipeline import paperlake
from flows.publish import history
from flows.publish.stage import start_writing
from tests.conftest import write


def data_files(settings: Settings) -> dict[str, int]:
    """Each data file under the warehouse's data path, with its size."""
    root = settings.warehouse / "data"
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*.parquet")}


@pytest.fixture
def victim(sample_run, tmp_path) -> Settings:
    """A copy of the sample warehouse, as `cp -a warehouse ../victim` makes it."""
    target = tmp_path / "victim"
    shutil.copytree(sample_run.settings.warehouse, target)
    return Settings(warehouse=target, raw=sample_run.settings.raw)


def test_a_new_catalog_refuses_a_data_path_holding_another_warehouses_files(
    prefect_server, victim, tmp_path
):
    before, files = history.checksums(victim), data_files(victim)
    scratch = tmp_path / "scratch"
    given = str(victim.warehouse / "data")
    with pytest.raises(DataPathTaken, match=r"already holds \d+ DuckLake data files of another"):
        paperlake(raw=[str(victim.raw[0])], warehouse=str(scratch), data_path=given)
    # The same through the command line, as a user with PAPERLAKE_DATA_PATH exported runs it.
    shown = CliRunner().invoke(
        app, ["run", "--raw", str(victim.raw[0]), "-w", str(scratch)],
        env={"PAPERLAKE_DATA_PATH": given},
    )  # fmt: skip
    assert shown.exit_code == 1
    assert "already holds" in " ".join(shown.output.split())
    assert "Traceback" not in shown.output
    assert not (scratch / "catalog.ducklake").exists()
    assert data_files(victim) == files
    assert history.checksums(victim) == before


def test_a_lost_catalog_is_an_error_that_says_how_to_restore(prefect_server, victim, tmp_path):
    before, files = history.checksums(victim), data_files(victim)
    backup = tmp_path / "backup.ducklake"
    shutil.copy(victim.catalog_path, backup)
    victim.catalog_path.unlink()

    with pytest.raises(CatalogLost, match="restore the catalog from a backup"):
        paperlake(raw=[str(victim.raw[0])], warehouse=str(victim.warehouse))
    for command in (["run", "--raw", str(victim.raw[0])], ["versions"], ["checksum"]):
        shown = CliRunner().invoke(app, [*command, "-w", str(victim.warehouse)])
        assert shown.exit_code == 1, command
        said = " ".join(shown.output.split())
        assert "is missing, but" in said and "restore the catalog" in said, command
    assert not victim.catalog_path.exists()
    assert data_files(victim) == files

    shutil.copy(backup, victim.catalog_path)  # restored: every version reads as before
    assert history.checksums(victim) == before


def test_a_data_path_that_names_another_catalog_is_refused_for_reading_and_writing(
    prefect_server, victim, sample_run, tmp_path
):
    other = tmp_path / "other"
    paperlake(raw=[str(victim.raw[0])], warehouse=str(other))
    marker = json.loads((other / "data" / data_path.MARKER).read_text())
    assert marker["catalog"] == str((other / "catalog.ducklake").resolve())

    # The victim's catalog (a copy of the sample's) pointed at the other's data path.
    pointed = victim.with_(data_path=str(other / "data"))
    files = data_files(Settings(warehouse=other))
    con = connect(extensions=())
    with pytest.raises(DataPathTaken, match="belongs to the catalog .*other/catalog.ducklake"):
        attach(con, pointed, read_only=True)
    con.close()
    with pytest.raises(DataPathTaken, match="belongs to the catalog"):
        paperlake(
            raw=[str(victim.raw[0])], warehouse=str(victim.warehouse),
            data_path=str(other / "data"), force=True,
        )  # fmt: skip
    assert data_files(Settings(warehouse=other)) == files


def test_a_writer_deletes_only_the_unrecorded_files_a_killed_writer_of_its_own_left(
    prefect_server, victim
):
    folder = victim.warehouse / "data"
    foreign = write(folder / "main" / "papers" / "ducklake-foreign.parquet", b"not ours")
    os.utime(foreign, (time.time() - 3600, time.time() - 3600))
    # Nothing says a writer died: an unrecorded file stays, whatever its age.
    con = connect(extensions=())
    attach(con, victim, create=True)
    start_writing(con, victim)
    assert foreign.exists()
    data_path.end_writing(con, LAKE, victim)
    assert not (folder / data_path.WRITING).exists()

    # A writer began and was killed before its commit: it left a file of its own.
    start_writing(con, victim)
    left = write(folder / "main" / "papers" / "ducklake-left.parquet", b"a killed run's")
    assert data_path.begin_writing(con, LAKE, victim) == 1
    assert foreign.exists() and not left.exists()
    data_path.end_writing(con, LAKE, victim)
    publish.detach(con)
    con.close()
    assert json.loads((folder / data_path.MARKER).read_text())["schema_uuid"]
