"""`paperlake run` as a process: stopped by a signal or killed, it leaves no server behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.lake import attach, catalog_exists, connect, published_versions
from flows.settings import PROJECT_ROOT, Settings
from tests.conftest import SAMPLE_RAW

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

PAPERLAKE = Path(sys.executable).with_name("paperlake")


def state(pid: int) -> str | None:
    """The process's state letter from /proc, or None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    return state(pid) not in (None, "Z")


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            pass
    return found


def wait_for(condition, timeout: float, what: str):
    """Poll `condition` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := condition():
            return result
        time.sleep(0.05)
    pytest.fail(f"{what} within {timeout} s")


def server_of(run: subprocess.Popen) -> int:
    """The pid of the run's temporary Prefect server, once it has been started."""

    def find() -> int | None:
        if run.poll() is not None:
            pytest.fail(f"the run ended early with {run.returncode}")
        for pid in children(run.pid):
            if b"flows.api_server" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        return None

    return wait_for(find, 60, "no temporary Prefect server started")


def flow_running(warehouse: Path) -> bool:
    """True once the flow holds the warehouse lock, which it takes first."""
    lock = warehouse / ".lock"
    return lock.exists() and lock.read_text().startswith("pid ")


def start_run(warehouse: Path, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    with (log / "out").open("w") as out, (log / "err").open("w") as err:
        return subprocess.Popen(
            [PAPERLAKE, "run", "--raw", SAMPLE_RAW, "--warehouse", warehouse],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=out,
            stderr=err,
            start_new_session=True,  # a terminal's Ctrl-C goes to the run's process group
        )


def published(warehouse: Path) -> list[int]:
    settings = Settings(warehouse=warehouse)
    if not catalog_exists(settings):
        return []
    con = connect()
    try:
        attach(con, settings, read_only=True)
        return published_versions(con)
    finally:
        con.close()


def stop_all(*pids: int) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("when", "signum"),
    [
        ("startup", signal.SIGTERM),  # the model loads while the server starts
        ("startup", signal.SIGINT),
        ("flow", signal.SIGTERM),  # Prefect's own SIGTERM handler is in place
    ],
)
def test_signal_stops_run_with_one_line(tmp_path, when, signum):
    warehouse = tmp_path / "warehouse"
    run = start_run(warehouse, tmp_path)
    server = None
    try:
        server = server_of(run)
        if when == "flow":
            wait_for(lambda: flow_running(warehouse), 60, "the flow did not start")
        sent = time.monotonic()
        if signum == signal.SIGINT:
            os.killpg(run.pid, signum)  # as Ctrl-C in a terminal
        else:
            run.send_signal(signum)
        code = run.wait(timeout=15)
        took = time.monotonic() - sent
        # The run stops its server before it exits; one that had to be cut short leaves
        # the server to notice and stop by itself.
        wait_for(lambda: not alive(server), 5, "the server did not stop")
    finally:
        stop_all(run.pid, *([server] if server else []))
        run.wait()
    print(f"{signal.Signals(signum).name} at {when}: stopped in {took:.2f} s")
    assert code == 128 + signum
    assert took < 15
    stderr = (tmp_path / "err").read_text()
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    # The stage logs of the flow come first; after the stop, one line and nothing else.
    assert lines[-1].startswith(f"error: run stopped by {signal.Signals(signum).name}"), stderr
    assert all(" | INFO " in line for line in lines[:-1]), stderr
    assert published(warehouse) == []


def test_server_stops_by_itself_when_run_is_killed(tmp_path):
    warehouse = tmp_path / "warehouse"
    run = start_run(warehouse, tmp_path)
    server = None
    try:
        server = server_of(run)
        wait_for(lambda: flow_running(warehouse), 60, "the flow did not start")
        run.kill()
        run.wait(timeout=5)
        killed = time.monotonic()
        wait_for(lambda: not alive(server), 5, "the server did not stop")
        took = time.monotonic() - killed
    finally:
        stop_all(run.pid, *([server] if server else []))
        run.wait()
    print(f"SIGKILL: the server stopped {took:.2f} s after the run")
    assert published(warehouse) == []
