"""Scheduled runs for real: `paperlake serve` with its own Prefect server, and the deployment
route (work pool, `prefect deploy`, a process worker)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import yaml

from flows.core.lake import open_lake, published_versions
from flows.core.settings import PROJECT_ROOT, Settings
from flows.serve.prefect_server import free_port, start_server
from tests.conftest import SAMPLE_RAW
from tests.test_process import alive, descendants, wait_for

BIN = Path(sys.executable).parent


def completed_runs(api: str) -> list[dict]:
    try:
        reply = httpx.post(
            f"{api}/flow_runs/filter",
            json={"flow_runs": {"state": {"type": {"any_": ["COMPLETED"]}}}, "limit": 5},
            timeout=5,
        )
    except httpx.TransportError:
        return []
    return reply.json() if reply.status_code == 200 else []


def test_serve_starts_a_server_runs_on_schedule_and_stops_cleanly(tmp_path):
    warehouse, port = tmp_path / "warehouse", free_port()
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen(
        [BIN / "paperlake", "serve", "--interval", "20", "--raw", SAMPLE_RAW,
         "--warehouse", warehouse, "--port", str(port), "--neighbors-k", "5"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    started: dict[int, bytes] = {}
    try:
        api = f"http://127.0.0.1:{port}/api"
        runs = wait_for(lambda: completed_runs(api), 300, "no completed flow run")
        started = descendants(serve.pid)
        # serve takes run's settings, and its scheduled runs run with them.
        assert runs[0]["parameters"]["neighbors_k"] == 5
        # The UI finds the API where the server listens, not at Prefect's default port.
        settings = httpx.get(f"http://127.0.0.1:{port}/ui-settings", timeout=5).json()
        assert settings["api_url"] == api

        def messages() -> list[str]:
            logs = httpx.post(
                f"{api}/logs/filter",
                json={"logs": {"flow_run_id": {"any_": [runs[0]["id"]]}}, "limit": 200},
                timeout=5,
            ).json()
            found = [entry["message"] for entry in logs]
            return found if any(m.startswith("publish: version 1 of ") for m in found) else []

        # Logs reach the server in batches, shortly after the run.
        logged = wait_for(messages, 60, "the run's stage logs did not reach the server")
        assert any(m.startswith("ingest: 2 files") for m in logged), logged
        output = (tmp_path / "serve.log").read_text()
        assert f"Prefect UI: http://127.0.0.1:{port}" in output
        assert block_types(api)  # the UI's server registers them for its users
        assert "serving paperlake/scheduled (every 20 s; next runs at about" in output
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        finally:
            leftover = [pid for pid in [*started, serve.pid] if alive(pid)]
            for pid in leftover:
                os.kill(pid, signal.SIGKILL)
    assert serve.returncode == 0
    assert any(b"flows.serve.api_server" in line for line in started.values())
    assert leftover == []
    with open_lake(Settings(warehouse=warehouse)) as con:  # later runs were up to date
        assert published_versions(con) == [1]
        assert con.execute("select max(rank) from neighbors").fetchone() == (5,)
    assert (
        "stopped: the schedule and the Prefect server it started"
        in (tmp_path / "serve.log").read_text()
    )


def block_types(api: str) -> list[str]:
    reply = httpx.post(f"{api}/block_types/filter", json={}, timeout=10)
    reply.raise_for_status()
    return [entry["slug"] for entry in reply.json()]


def test_a_run_server_starts_without_registering_block_types(tmp_path):
    """A run's short-lived server answers without writing every block type into a new
    database (runs use none); flows run on it as on any server."""
    server = start_server(Settings(warehouse=tmp_path / "warehouse"))
    try:
        server.wait_healthy()
        assert block_types(server.api_url) == []
        env = {**os.environ, "PREFECT_API_URL": server.api_url}
        done = subprocess.run(
            [BIN / "paperlake", "run", "--raw", SAMPLE_RAW, "--warehouse", tmp_path / "warehouse"],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert "publish: version 1 of" in done.stderr + done.stdout
    finally:
        server.stop()
    assert server.process.poll() is not None


def test_serve_refuses_a_busy_port_and_two_schedules(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        done = subprocess.run(
            [BIN / "paperlake", "serve", "--cron", "0 6 * * *", "--port", str(port),
             "--warehouse", tmp_path / "w"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 1
    assert f"port {port} is in use" in done.stderr
    done = subprocess.run(
        [BIN / "paperlake", "serve", "--cron", "0 6 * * *", "--interval", "60",
         "--warehouse", tmp_path / "w"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1 and "give one schedule" in done.stderr
    assert "not both" in done.stderr


def test_sigterm_as_serve_starts_stops_it_cleanly(tmp_path):
    """SIGTERM just after serve wrote its runner address, before Prefect's runner handles
    signals: serve stops as it says, with its server, and leaves no runner address."""
    warehouse = tmp_path / "warehouse"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen(
        [BIN / "paperlake", "serve", "--raw", SAMPLE_RAW, "--warehouse", warehouse,
         "--port", str(free_port())],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    runner = warehouse / "prefect" / "runner.json"
    started: dict[int, bytes] = {}
    try:
        wait_for(runner.exists, 300, "serve wrote no runner address")
        started = descendants(serve.pid)
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
    output = (tmp_path / "serve.log").read_text()
    assert serve.returncode == 0, output
    assert "stopped: the schedule and the Prefect server it started" in output
    assert not runner.exists()
    assert any(b"flows.serve.api_server" in line for line in started.values())
    wait_for(lambda: not any(alive(pid) for pid in started), 30, "serve's server still runs")


def test_run_is_handed_to_a_running_serve_of_its_warehouse(tmp_path):
    raw, warehouse, port = tmp_path / "raw", tmp_path / "warehouse", free_port()
    shutil.copytree(SAMPLE_RAW, raw)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    run = [BIN / "paperlake", "run", "--raw", raw, "--warehouse", warehouse]
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen(
        [BIN / "paperlake", "serve", "--raw", raw, "--warehouse", warehouse, "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    runner = warehouse / "prefect" / "runner.json"
    try:
        wait_for(runner.exists, 300, "serve wrote no runner address")
        assert oct(runner.stat().st_mode & 0o777) == "0o600"
        first = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
        assert first.returncode == 0, first.stderr
        assert f"run handed to paperlake serve on {warehouse}" in first.stdout
        assert "embeddings computed: 38  reused: 0" in first.stdout
        # The run's log lines come back as the serving process writes them.
        assert "ingest: 2 files (2 parsed, 0 skipped), 38 records seen" in first.stderr
        (raw / "new.txt").write_text(
            "ICLR 2026 Papers\n\n" + " ".join(["A new abstract about sparse retrieval"] * 6)
        )
        second = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
        assert second.returncode == 0, second.stderr
        assert "embeddings computed: 1  reused: 38" in second.stdout
        assert f"version 2 of {warehouse} published" in second.stdout
        again = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
        assert "up to date at version 2" in again.stdout
        # Real flow runs of the serve's API, named as the summaries name them.
        api = f"http://127.0.0.1:{port}/api"
        names = {r["name"] for r in completed_runs(api)}
        for done in (first, second):
            assert re.search(r"flow run ([a-z]+-[a-z]+)", done.stdout).group(1) in names
        # A run the serving process cannot take (a missing file) fails as it would alone.
        missing = subprocess.run(
            [*run, "--model", tmp_path / "no-model"], env=env, capture_output=True, text=True
        )
        assert missing.returncode == 1 and "no-model" in missing.stderr
        assert serve.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
    stopped = (tmp_path / "serve.log").read_text()[-3000:]
    assert serve.returncode == 0, stopped
    assert not runner.exists(), stopped
    with open_lake(Settings(warehouse=warehouse)) as con:
        assert published_versions(con) == [1, 2]
    # Without a serve, the run is its own again.
    (raw / "newer.txt").write_text(
        "ICLR 2026 Papers\n\n" + " ".join(["Another abstract about dense retrieval"] * 6)
    )
    alone = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
    assert alone.returncode == 0 and "run handed to" not in alone.stdout
    assert "embeddings computed: 1  reused: 39" in alone.stdout


def test_prefect_yaml_matches_the_installed_prefect_and_needs_no_environment():
    from importlib.metadata import version

    spec = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text())
    assert spec["prefect-version"] == version("prefect")
    assert "pull" not in spec  # `prefect deploy` then points runs at the folder it ran in
    assert "PAPERLAKE_HOME" not in (PROJECT_ROOT / "prefect.yaml").read_text()


def test_the_deployment_route_runs_a_flow_through_a_process_worker(prefect_server, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    prefect = [str(BIN / "prefect"), "--no-prompt"]

    def cli(*args: str) -> str:
        done = subprocess.run(
            [*prefect, *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    pools = cli("work-pool", "ls")
    if "paperlake-local" not in pools:
        cli("work-pool", "create", "paperlake-local", "--type", "process")
    cli("deploy", "--all")
    warehouse = tmp_path / "warehouse"
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name("paperlake/daily")
        assert [s.schedule.cron for s in deployment.schedules] == ["0 6 * * *"]
        assert deployment.work_pool_name == "paperlake-local"
        assert deployment.pull_steps == [
            {"prefect.deployments.steps.set_working_directory": {"directory": str(PROJECT_ROOT)}}
        ]
        run = client.create_flow_run_from_deployment(
            deployment.id, parameters={"raw": [str(SAMPLE_RAW)], "warehouse": str(warehouse)}
        )
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [*prefect, "worker", "start", "--pool", "paperlake-local"],
        cwd=tmp_path,  # a worker started anywhere runs the flow in the project folder
        env={**env, "PREFECT_WORKER_QUERY_SECONDS": "1"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:

        def finished():
            with get_client(sync_client=True) as client:
                state = client.read_flow_run(run.id).state
            return state if state and state.is_final() else None

        state = wait_for(finished, 300, "the deployment's flow run did not finish")
        assert state.is_completed(), (tmp_path / "worker.log").read_text()[-3000:]
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:  # a worker's graceful shutdown, on a loaded machine
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
    with open_lake(Settings(warehouse=warehouse)) as con:
        assert published_versions(con) == [1]
        assert con.execute("select count(*) from papers").fetchone() == (38,)


def test_a_new_warehouse_starts_from_a_migrated_prefect_database(tmp_path, monkeypatch):
    import sqlite3

    import prefect

    from flows.serve.prefect_server import database_url

    def migration(path: Path) -> list[tuple]:
        with sqlite3.connect(path) as db:
            return db.execute("select version_num from alembic_version").fetchall()

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    url = database_url(Settings(warehouse=tmp_path / "one"))
    template = tmp_path / "cache" / "paperlake" / "prefect" / prefect.__version__ / "prefect.db"
    copy = tmp_path / "one" / "prefect" / "prefect.db"
    assert url == f"sqlite+aiosqlite:///{copy}"
    assert len(migration(template)) == 1 and migration(copy) == migration(template)
    made = template.stat().st_mtime_ns
    # The next warehouse copies the same template; a warehouse's own database is kept.
    database_url(Settings(warehouse=tmp_path / "two"))
    assert template.stat().st_mtime_ns == made
    assert migration(tmp_path / "two" / "prefect" / "prefect.db") == migration(template)
    with sqlite3.connect(copy) as db:
        db.execute("create table mine (x int)")
    database_url(Settings(warehouse=tmp_path / "one"))
    with sqlite3.connect(copy) as db:
        assert db.execute("select count(*) from mine").fetchone() == (0,)


def test_the_warm_runner_sends_each_message_at_once():
    """Both ends of a hand-over turn off Nagle's algorithm after the key's handshake, whose
    last message is the client's: the request after it would wait for a delayed ACK."""
    import socket
    import threading
    from multiprocessing.connection import Client, Listener

    from flows.serve.warm_runner import send_at_once

    def nodelay(conn) -> int:
        with socket.socket(fileno=os.dup(conn.fileno())) as sock:
            return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)

    with Listener(("127.0.0.1", 0), authkey=b"key") as listener:
        accepted = []
        thread = threading.Thread(target=lambda: accepted.append(listener.accept()))
        thread.start()
        client = Client(listener.address, authkey=b"key")
        thread.join(timeout=30)
        server = accepted[0]
        assert (nodelay(client), nodelay(server)) == (0, 0)
        for conn in (client, server):
            send_at_once(conn)
        assert nodelay(client) and nodelay(server)
        client.send({"parameters": {}})
        assert server.recv() == {"parameters": {}}  # the connection still works
        client.close()
        server.close()
