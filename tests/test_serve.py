"""Scheduled runs: `paperlake serve --cron` registers a deployment on a Prefect server."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from prefect.client.orchestration import get_client
from prefect.settings import PREFECT_API_URL

from flows.settings import PROJECT_ROOT
from tests.conftest import SAMPLE_RAW


def read_deployment(name: str, timeout: float = 120):
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            try:
                return client.read_deployment_by_name(name)
            except Exception:  # noqa: BLE001 - not registered yet
                time.sleep(1)
    raise AssertionError(f"deployment {name} was not registered within {timeout} s")


def test_serve_registers_a_cron_deployment(prefect_server, tmp_path):
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flows.cli",
            "serve",
            "--cron",
            "0 6 * * *",
            "--raw",
            str(SAMPLE_RAW),
            "-w",
            str(tmp_path / "warehouse"),
            "--name",
            "daily",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deployment = read_deployment("paperlake/daily")
        crons = [s.schedule.cron for s in deployment.schedules]
        assert crons == ["0 6 * * *"]
        assert deployment.parameters == {
            "raw": [str(SAMPLE_RAW.resolve())],
            "warehouse": str((tmp_path / "warehouse").resolve()),
        }
        assert server.poll() is None  # still serving
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_prefect_yaml_deploys_the_daily_deployment(prefect_server):
    from prefect.client.schemas.actions import WorkPoolCreate

    # The pool may exist already from an earlier test in this session.
    with get_client(sync_client=True) as client, contextlib.suppress(Exception):
        client.create_work_pool(WorkPoolCreate(name="paperlake-local", type="process"))
    env = {
        **os.environ,
        "PREFECT_API_URL": PREFECT_API_URL.value(),
        "PAPERLAKE_HOME": str(PROJECT_ROOT),
    }
    prefect = Path(sys.executable).parent / "prefect"
    done = subprocess.run(
        [str(prefect), "--no-prompt", "deploy", "--all"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    deployment = read_deployment("paperlake/daily", timeout=30)
    assert [s.schedule.cron for s in deployment.schedules] == ["0 6 * * *"]
    assert deployment.entrypoint == "flows/pipeline.py:paperlake"
    assert deployment.parameters == {"raw": ["data/raw"], "warehouse": "warehouse"}
    assert deployment.work_pool_name == "paperlake-local"
