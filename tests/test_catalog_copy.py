"""A long-lived reader's copy of the catalog: runs publish while the explorer serves."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pytest

from flows.core.errors import WarehouseBusy, WarehouseError
from flows.core.locks import LOCK_POLL_SECONDS
from flows.core.settings import PROJECT_ROOT, Settings
from flows.read import CatalogCopy, reader_of
from tests.conftest import SAMPLE_RAW

# Holds the catalog for writing, as a run does, and commits a row to it; then waits for a
# line on stdin (or the seconds given), and ends cleanly, checkpointing the row into the file.
HOLD = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("checkpoint")
con.execute("create or replace table held as select 7 as x")
print("holding", flush=True)
time.sleep(float(sys.argv[2])) if len(sys.argv) > 2 else sys.stdin.readline()
con.close()
"""
NEW_ABSTRACT = (
    "We index sparse retrieval over tidal gauge records: a learned inverted file over "
    "harbour sensor readings answers range queries about storm surges in milliseconds, "
    "and we release the gauge corpus with its sparse retrieval benchmark."
)


@pytest.fixture
def warehouse(sample_run, tmp_path) -> Path:
    """A copy of the session's sample warehouse (version 1, 38 papers)."""
    target = tmp_path / "warehouse"
    shutil.copytree(sample_run.settings.warehouse, target)
    return target


def hold(catalog: Path, seconds: float | None = None) -> subprocess.Popen:
    """Another process holding `catalog` for writing (until told, or for `seconds`), once
    it says so."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(catalog), *([str(seconds)] if seconds else [])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline() == "holding\n"
    return holder


def held_rows(copy: CatalogCopy) -> list[tuple]:
    with duckdb.connect(str(copy.reading.catalog_path), read_only=True) as con:
        return con.execute("select x from held").fetchall()


def test_a_copy_is_taken_anew_once_the_catalog_changed_never_while_it_is_held(warehouse):
    copy = CatalogCopy(Settings(warehouse=warehouse))
    try:
        assert copy.take() is True and copy.take() is False  # unchanged: the same copy
        first = copy.reading.catalog_path
        assert first.read_bytes() == (warehouse / "catalog.ducklake").read_bytes()
        holder = hold(warehouse / "catalog.ducklake")
        try:
            started = time.monotonic()
            assert copy.take() is False  # changed, but held: the last copy goes on
            assert time.monotonic() - started < 1 and copy.reading.catalog_path == first
        finally:
            holder.communicate("done\n", timeout=30)
        time.sleep(LOCK_POLL_SECONDS)  # a held catalog is tried again after this
        assert copy.take() is True
        assert copy.reading.catalog_path != first and held_rows(copy) == [(7,)]
        assert copy.reading.warehouse == warehouse
        assert copy.reading.data_location == str(warehouse / "data")
        copy.prune()
        assert not first.exists() and copy.reading.catalog_path.exists()
    finally:
        copy.close()
    assert not Path(copy.folder.name).exists()


def test_a_copy_holds_what_a_killed_writer_left_in_the_write_ahead_log(warehouse):
    holder = hold(warehouse / "catalog.ducklake")
    holder.kill()
    holder.wait()
    assert Path(f"{warehouse}/catalog.ducklake.wal").exists()
    copy = reader_of(Settings(warehouse=warehouse))
    try:
        assert held_rows(copy) == [(7,)]
    finally:
        copy.close()


def test_the_first_copy_waits_for_a_held_catalog_then_says_so(warehouse):
    holder = hold(warehouse / "catalog.ducklake")
    try:
        with pytest.raises(WarehouseBusy, match=r"catalog .*catalog.ducklake is still in use"):
            CatalogCopy(Settings(warehouse=warehouse)).take(wait=1)
    finally:
        holder.communicate("done\n", timeout=30)
    with pytest.raises(WarehouseError, match=r"no warehouse at .*nowhere: run `paperlake run`"):
        reader_of(Settings(warehouse=warehouse.parent / "nowhere"))
    assert reader_of(Settings(warehouse=warehouse, catalog="postgresql://x@h/db")) is None


def add_version(warehouse: Path, folder: Path) -> object:
    """Run the flow on the sample and one new abstract (a file in `folder`): version 2."""
    from flows.pipeline import paperlake

    folder.mkdir()
    (folder / "tides.txt").write_text(f"ICLR 2026 Papers\n\n{NEW_ABSTRACT}\n")
    return paperlake(raw=[str(SAMPLE_RAW), str(folder)], warehouse=str(warehouse))


def test_a_request_after_compact_removed_what_its_copy_reads_reads_a_new_copy(warehouse, tmp_path):
    """`compact` removes data files the explorer's copy still reads, and a run holds the
    catalog at once after it: the next request waits for the run, then reads a new copy."""
    from flows.publish import compact
    from flows.serve.explorer import Explorer

    add_version(warehouse, tmp_path / "new")
    settings = Settings(warehouse=warehouse)
    explorer = Explorer(settings)
    try:
        before = {v: (explorer.map(v), explorer.overview(v)) for v in (1, 2)}
        assert compact(settings).removed > 0
        holder = hold(warehouse / "catalog.ducklake", seconds=2)
        started = time.monotonic()
        after = {v: (explorer.map(v), explorer.overview(v)) for v in (1, 2)}
        waited = time.monotonic() - started
        holder.wait(timeout=30)
    finally:
        explorer.close()
    assert after == before and before[2][1]["papers"] == 39
    assert 0.5 < waited < 30  # it waited for the holder's two seconds (from its start)


ASKED = ("api/search?q=diffusion+models", "api/overview", "api/versions", "api/map")


def ask_until(base: str, stop: threading.Event) -> list[tuple[float, str, int | str]]:
    """Ask the explorer what its page asks, a request every tenth of a second, until
    `stop`: (when, path, status or error) of each."""
    answers = []
    while not stop.is_set():
        path = ASKED[len(answers) % len(ASKED)]
        try:
            with urllib.request.urlopen(base + path, timeout=30) as response:
                status: int | str = response.status
        except (urllib.error.URLError, OSError) as exc:
            status = str(exc)
        answers.append((time.monotonic(), path, status))
        stop.wait(0.1)
    return answers


def get(base: str, path: str, **query: object) -> dict:
    url = base + path + ("?" + urllib.parse.urlencode(query) if query else "")
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def test_a_run_publishes_while_the_explorer_answers_a_steady_request_loop(warehouse, tmp_path):
    """The explorer in use, several requests a second: a run with one new abstract
    publishes at once (the catalog held by a reader made it wait 60 s, then fail), every
    request answers, and the explorer then shows the new version."""
    explorer = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", "explore", "-w", warehouse, "--port", "0"],
        cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        first = explorer.stdout.readline()
        base = re.search(r"paperlake explorer: (http://\S+/)", first).group(1)
        stop = threading.Event()
        with ThreadPoolExecutor(1) as pool:
            asking = pool.submit(ask_until, base, stop)
            try:
                time.sleep(1)
                started = time.monotonic()
                summary = add_version(warehouse, tmp_path / "new")
                ended = time.monotonic()
                time.sleep(1)
            finally:
                stop.set()
            answers = asking.result()
        versions = get(base, "api/versions")
        found = get(base, "api/search", q="sparse retrieval over tidal gauge records")
        overview = get(base, "api/overview")
    finally:
        explorer.send_signal(signal.SIGINT)
        output = explorer.communicate(timeout=30)[0]
    during = [a for a in answers if started <= a[0] <= ended]
    print(f"run: {ended - started:.1f} s, publish {summary.stage_seconds['publish']:.2f} s; "
          f"{len(answers)} requests, {len(during)} during the run")  # fmt: skip
    assert summary.version == 2 and ended - started < 40
    assert summary.stage_seconds["publish"] < 10
    assert [status for _, _, status in answers] == [200] * len(answers)
    assert len(during) >= ended - started  # a steady loop throughout
    assert [v["version"] for v in versions["versions"]] == [2, 1] and versions["default"] == 2
    assert found["version"] == 2 and found["hits"][0]["abstract"] == NEW_ABSTRACT
    assert overview["version"] == 2 and overview["papers"] == 39
    assert "Traceback" not in output and explorer.returncode == 0
