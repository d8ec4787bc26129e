"""The DuckLake catalog on a real PostgreSQL server: runs publish the file catalog's content,
runs started at once leave one version, readers see whole versions and never wait, and the
run lock is an advisory lock that names its holder and outlives no process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.core.lake import catalog_exists, open_lake, published_versions
from flows.core.locks import run_lock
from flows.core.settings import PROJECT_ROOT, Settings
from flows.publish import history
from tests.conftest import SAMPLE_RAW
from tests.postgres import PostgresMissing, PostgresServer, start_server
from tests.test_history import add_new_dump

PAPERLAKE = Path(sys.executable).with_name("paperlake")
WAITING = "waiting for the run holding"


@pytest.fixture(scope="session")
def postgres_server():
    """One throwaway PostgreSQL cluster for the session; no process of it outlives it."""
    try:
        server = start_server()
    except PostgresMissing as exc:
        pytest.fail(str(exc), pytrace=False)  # a missing server is a broken setup, not a skip
    postmaster = server.pid()
    yield server
    server.stop()
    assert postmaster is not None and not Path(f"/proc/{postmaster}").exists()


@dataclass
class SharedLake:
    """A warehouse whose catalog is database `lake`, with data/raw published as version 1."""

    settings: Settings
    output: str


@pytest.fixture(scope="module")
def shared_lake(prefect_server, postgres_server: PostgresServer, tmp_path_factory) -> SharedLake:
    url = postgres_server.create_database("lake")
    warehouse = tmp_path_factory.mktemp("pg") / "warehouse"
    settings = Settings(warehouse=warehouse, catalog=url, raw=(SAMPLE_RAW,))
    assert not catalog_exists(settings)  # a database without DuckLake's tables: no warehouse
    started = time.perf_counter()
    result = invoke("run", "--raw", SAMPLE_RAW, "--warehouse", warehouse, "--catalog", url)
    print(f"run on the PostgreSQL catalog: {time.perf_counter() - started:.1f} s")
    assert result.exit_code == 0, result.output
    return SharedLake(settings, result.output)


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def paperlake(*args: object, stdout=subprocess.PIPE, stderr=subprocess.PIPE) -> subprocess.Popen:
    """`paperlake ARGS` as a user starts it, on the session's Prefect API."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value() or ""}
    return subprocess.Popen(
        [PAPERLAKE, *map(str, args)], cwd=PROJECT_ROOT, env=env, stdout=stdout, stderr=stderr,
        text=True,
    )  # fmt: skip


def test_run_publishes_the_file_catalogs_content(shared_lake, sample_run):
    settings = shared_lake.settings
    url = settings.catalog
    assert f"version 1 of {settings.warehouse} published" in shared_lake.output
    assert catalog_exists(settings)
    count = invoke("query", "select count(*) as n from papers", "--version", 1,
                   "--catalog", url, "--format", "csv")  # fmt: skip
    assert count.exit_code == 0 and count.stdout == "n\n38\n", count.output

    # The same raw files published through the DuckDB-file catalog: the same content.
    on_file = history.checksums(sample_run.settings, 1)
    on_postgres = history.checksums(settings, 1)
    assert on_postgres == on_file
    shown = invoke("checksum", "--version", 1, "--catalog", url, "--format", "csv")
    assert f"(version),{on_file[2]}" in shown.stdout

    # Another machine needs only the catalog's URL: the data path is the catalog's own.
    elsewhere = Settings(warehouse=Path("/nonexistent/warehouse"), catalog=url)
    with open_lake(elsewhere, 1) as con:
        assert con.execute("select count(*) from embeddings").fetchone() == (38,)
    # Even from a warehouse folder whose data/ belongs to a file catalog (as after `make
    # run`): the shared catalog reads the data path it recorded, which is its own.
    assert (sample_run.settings.warehouse / "data" / "paperlake-catalog.json").is_file()
    there = invoke("versions", "--catalog", url, "-w", sample_run.settings.warehouse)
    assert there.exit_code == 0 and "paperlake run" in there.output, there.output


def test_two_runs_started_at_once_leave_one_version(
    prefect_server, postgres_server: PostgresServer, tmp_path
):
    url = postgres_server.create_database("lake2")
    warehouse = tmp_path / "warehouse"
    args = ("run", "--raw", SAMPLE_RAW, "--warehouse", warehouse, "--catalog", url)
    runs = [paperlake(*args), paperlake(*args)]
    outputs = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    stdouts = sorted(out for out, _ in outputs)
    published = [out for out in stdouts if f"version 1 of {warehouse} published" in out]
    up_to_date = [out for out in stdouts if "up to date at version 1" in out]
    assert (len(published), len(up_to_date)) == (1, 1), stdouts
    waited = [err for _, err in outputs if WAITING in err]
    print(f"runs that waited for the other: {len(waited)}")
    for err in waited:
        assert f"{WAITING} postgresql://postgres@127.0.0.1:{postgres_server.port}/lake2: pid" in err
    settings = Settings(warehouse=warehouse, catalog=url)
    with open_lake(settings) as con:
        assert published_versions(con) == [1]
        assert con.execute("select count(*) from papers").fetchone() == (38,)
        assert con.execute("select count(*) from runs").fetchone() == (1,)


def test_a_query_during_a_publish_sees_one_whole_version(shared_lake, raw_copy):
    import psycopg

    settings = shared_lake.settings
    add_new_dump(raw_copy)  # version 2: 43 papers
    observed: list[tuple[int, int, bool, float]] = []  # papers, runs' version, locked, seconds
    done = threading.Event()

    def read_while_publishing() -> None:
        with open_lake(settings) as con, psycopg.connect(settings.catalog) as pg:
            while not done.is_set():
                locked = pg.execute(
                    "select count(*) > 0 from pg_locks where locktype = 'advisory' and granted"
                ).fetchone()[0]
                started = time.perf_counter()
                # One statement, one snapshot: papers and the runs table together.
                papers, version = con.execute(
                    "select (select count(*) from papers), (select max(snapshot_id) from runs)"
                ).fetchone()
                observed.append((papers, version, locked, time.perf_counter() - started))

    reader = threading.Thread(target=read_while_publishing)
    reader.start()
    try:
        run = paperlake("run", "--raw", raw_copy, "--warehouse", settings.warehouse,
                        "--catalog", settings.catalog)  # fmt: skip
        out, err = run.communicate(timeout=600)
    finally:
        done.set()
        reader.join()
    assert run.returncode == 0, err
    assert "version 2 of" in out
    seen = {(papers, version) for papers, version, _, _ in observed}
    assert seen == {(38, 1), (43, 2)}, seen
    during_run = [seconds for *_, locked, seconds in observed if locked]
    slowest = max(seconds for *_, seconds in observed)
    print(f"{len(observed)} reads, {len(during_run)} while the run held the lock; "
          f"slowest {slowest * 1000:.0f} ms, median "
          f"{sorted(s for *_, s in observed)[len(observed) // 2] * 1000:.1f} ms")  # fmt: skip
    # Readers never wait: reads went on at full pace while the run held the lock.
    assert len(during_run) > 10
    assert slowest < 2.0


LOCK_HOLDER = """
import sys, time
from flows.core.locks import run_lock
from flows.core.settings import Settings
with run_lock(Settings(warehouse=sys.argv[1], catalog=sys.argv[2])):
    print("holding", time.time(), flush=True)
    time.sleep(float(sys.argv[3]))
"""


def hold_lock(settings: Settings, seconds: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(settings.warehouse), settings.catalog,
         str(seconds)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=PROJECT_ROOT,
    )  # fmt: skip


def read_line_within(stream, seconds: float) -> str:
    """The next line of `stream`, failing the test after `seconds`."""
    lines: list[str] = []
    reading = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reading.start()
    reading.join(seconds)
    if not lines:
        pytest.fail(f"no line within {seconds} s")
    return lines[0]


@pytest.mark.parametrize("ending", ["exits", "SIGKILL"])
def test_the_advisory_lock_waits_names_the_holder_and_outlives_it(
    postgres_server: PostgresServer, tmp_path, ending
):
    url = postgres_server.url("postgres")
    settings = Settings(warehouse=tmp_path / "warehouse", catalog=url)
    holder = hold_lock(settings, 3 if ending == "exits" else 600)
    waiter = None
    try:
        assert read_line_within(holder.stdout, 30).startswith("holding")
        waiter = hold_lock(settings, 0)
        said = read_line_within(waiter.stderr, 30)
        assert said.startswith(f"{WAITING} postgresql://postgres@127.0.0.1:{postgres_server.port}")
        assert f": pid {holder.pid} on host " in said and " since " in said
        assert waiter.poll() is None  # still waiting, not refused
        if ending == "SIGKILL":
            holder.kill()
        holder.wait(timeout=30)
        ended = time.time()
        got = float(read_line_within(waiter.stdout, 30).split()[1])
        assert waiter.wait(timeout=30) == 0
    finally:
        for process in (holder, waiter):
            if process and process.poll() is None:
                process.kill()
                process.wait()
    print(f"holder {ending}: the waiter had the lock {got - ended:.2f} s later")
    assert got - ended < 2  # one poll (0.5 s) and a start-up margin


def test_a_run_waiting_for_the_lock_stops_at_once_on_sigterm(shared_lake, tmp_path):
    settings = shared_lake.settings
    with run_lock(settings):
        run = paperlake("run", "--force", "--raw", SAMPLE_RAW, "--warehouse",
                        settings.warehouse, "--catalog", settings.catalog,
                        stdout=subprocess.DEVNULL)  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            line = ""
            while WAITING not in line and time.monotonic() < deadline:
                line = read_line_within(run.stderr, 120)
            assert f"pid {os.getpid()} on host" in line, line
            sent = time.monotonic()
            run.send_signal(signal.SIGTERM)
            code = run.wait(timeout=15)
            took = time.monotonic() - sent
            rest = run.stderr.read()
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
    print(f"SIGTERM while waiting: stopped in {took:.2f} s")
    assert code == 128 + signal.SIGTERM and took < 10
    assert "Traceback" not in rest and "error: run stopped by SIGTERM" in rest


def test_an_unreachable_catalog_is_one_clear_line(postgres_server: PostgresServer, tmp_path):
    port = postgres_server.port
    cases = {
        f"postgresql://postgres:s3cret@127.0.0.1:{port}/missing": (
            f"cannot open the catalog postgresql://postgres@127.0.0.1:{port}/missing: "
            f'connection to server at "127.0.0.1", port {port} failed: FATAL: database '
            '"missing" does not exist'
        ),
        f"postgresql://nobody@127.0.0.1:{port}/postgres": 'role "nobody" does not exist',
        "postgres:dbname=lake host=127.0.0.1 port=1": (
            "cannot open the catalog dbname=lake host=127.0.0.1 port=1: "
            'connection to server at "127.0.0.1", port 1 failed: Connection refused'
        ),
    }
    for url, message in cases.items():
        for command in (["versions"], ["query", "select 1"]):
            result = invoke(*command, "--catalog", url, "-w", tmp_path)
            assert result.exit_code == 1, result.output
            assert message in " ".join(result.output.split()), result.output
            assert "Traceback" not in result.output and "s3cret" not in result.output


def test_compact_on_a_postgres_catalog_keeps_every_version(shared_lake):
    """Compaction is DuckLake's own maintenance, on the PostgreSQL catalog as on a file."""
    settings = shared_lake.settings
    with open_lake(settings) as con:
        versions = published_versions(con)
    sums = {version: history.checksums(settings, version) for version in versions}
    done = invoke("compact", "--catalog", settings.catalog, "-w", settings.warehouse)
    assert done.exit_code == 0, done.output
    assert f"at version {versions[-1]}:" in " ".join(done.output.split())
    assert {version: history.checksums(settings, version) for version in versions} == sums
    with open_lake(settings) as con:
        assert published_versions(con) == versions
