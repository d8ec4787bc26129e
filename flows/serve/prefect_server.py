"""The Prefect API a command talks to: PREFECT_API_URL when set, else a server it starts.

`paperlake run` starts a short-lived API server for its one flow run, while the model
loads, with the services a single run does not use turned off and no UI. `paperlake serve`
starts a persistent server with its UI and scheduler. Both keep their database with the
warehouse (`warehouse/prefect/prefect.db`), so the runs of `run` show in the UI of `serve`
later, and both run `flows.serve.api_server`: uvicorn on Prefect's app factory, configured by
Prefect's public settings only, that exits by itself when the command that started it
dies.
"""

from __future__ import annotations

import inspect
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import prefect
from prefect.events.worker import EventsWorker
from prefect.logging.handlers import APILogHandler, APILogWorker
from prefect.server.schemas.schedules import CronSchedule, IntervalSchedule
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_UI_URL,
    get_current_settings,
    temporary_settings,
)
from prefect.utilities.asyncutils import run_coro_as_sync

from flows.core.settings import Settings, paperlake_cache

# Services a single flow run does not need; the short-lived server of `paperlake run`
# starts without them so that they do not compete with the embedding.
IDLE_SERVICES = (
    "CANCELLATION_CLEANUP",
    "DB_VACUUM",
    "EVENT_LOGGER",
    "FOREMAN",
    "LATE_RUNS",
    "SCHEDULER",
    "PAUSE_EXPIRATIONS",
    "REPOSSESSOR",
    "CLEANUP_RECONCILER",
    "TRIGGERS",
)
START_TIMEOUT = 180  # seconds; a first start creates the database


class ServerError(RuntimeError):
    """A Prefect server that paperlake started did not come up."""


@dataclass
class Server:
    """A Prefect server process that paperlake started, and where it answers."""

    process: subprocess.Popen
    api_url: str
    ui_url: str | None

    def wait_healthy(self, timeout: float = START_TIMEOUT) -> None:
        """Block until the API answers its health check."""

        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise ServerError(f"the Prefect server exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.api_url}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise ServerError(f"the Prefect server did not start within {timeout:.0f} s")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s) and wait for it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def next_run_times(cron: str | None, interval: int | None, n: int = 3) -> list:
    """When a cron or interval schedule fires next, as Prefect's scheduler computes it."""

    schedule = (
        CronSchedule(cron=cron) if cron else IntervalSchedule(interval=timedelta(seconds=interval))
    )
    dates = schedule.get_dates(n)
    if inspect.isawaitable(dates):  # some schedules compute their dates asynchronously
        # Prefect's own loop thread: works whether or not this thread runs an event loop.
        dates = run_coro_as_sync(dates)
    return list(dates)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url(settings: Settings) -> str:
    """The Prefect database kept with the warehouse; a new one starts as a copy of an
    empty database with Prefect's tables made (`migrated_template`)."""
    folder = settings.warehouse.resolve() / "prefect"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "prefect.db"
    if not path.exists():
        template = migrated_template()
        if template is not None:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            shutil.copyfile(template, tmp)
            os.replace(tmp, path)
    return f"sqlite+aiosqlite:///{path}"


def migrated_template() -> Path | None:
    """An empty Prefect database with every migration applied, made once per Prefect
    version in the user's cache folder.

    A server's first start on a new database spends most of its time migrating it;
    started on a copy it answers sooner, and so does a run into a new warehouse. None
    where it cannot be made: the server then migrates as before.
    """

    template = paperlake_cache() / "prefect" / prefect.__version__ / "prefect.db"
    if template.exists():
        return template
    template.parent.mkdir(parents=True, exist_ok=True)
    tmp = template.with_suffix(f".{os.getpid()}.tmp")
    env = {
        **os.environ,
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{tmp}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    done = subprocess.run(
        [sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"],
        env=env, capture_output=True, text=True, timeout=START_TIMEOUT,
    )  # fmt: skip
    if done.returncode != 0 or not tmp.exists():
        logging.getLogger("paperlake").debug("no Prefect database template: %s", done.stderr)
        tmp.unlink(missing_ok=True)
        return None
    os.replace(tmp, template)
    return template


LOOPBACK = "127.0.0.1"


def api_address(cluster: str | None) -> tuple[str, str]:
    """Where a server started for a run listens, and the address its clients use.

    Loopback, unless the run's tasks go to a Dask scheduler on another host: its workers
    must reach the flow's API too, so the server then listens on every interface and is
    addressed by this host's address on the route to the scheduler.
    """

    host = urlsplit(cluster).hostname if cluster and "://" in cluster else None
    if host is None or host == "localhost" or host.startswith("127."):
        return LOOPBACK, LOOPBACK
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((host, 9))  # a UDP connect sends nothing; it picks the route
        return "0.0.0.0", probe.getsockname()[0]


def start_server(
    settings: Settings, port: int | None = None, ui: bool = False, cluster: str | None = None
) -> Server:
    """Start a Prefect server for `settings`' warehouse, on 127.0.0.1 unless `cluster` is a
    scheduler on another host (see `api_address`).

    Args:
        port: where it listens (default: a free port).
        ui: a persistent server with its UI and every service (schedules among them);
            otherwise a server for one run, without the UI and the idle services.
    """

    bind, advertise = api_address(cluster)
    port = port or free_port()
    env = {
        **os.environ,
        **get_current_settings().to_environment_variables(exclude_unset=True),
        "PREFECT_UI_ENABLED": "true" if ui else "false",
        # Where the UI in the browser finds the API.
        "PREFECT_SERVER_API_HOST": advertise,
        "PREFECT_SERVER_API_PORT": str(port),
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": database_url(settings),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
    }
    if not ui:
        env |= {f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in IDLE_SERVICES}
        # Nor does a run use blocks: registering every block type in a database new to
        # this user's memo (a new warehouse, or another than last time) would lengthen
        # its start. The UI's server registers them for its users.
        env["PREFECT_SERVER_REGISTER_BLOCKS_ON_START"] = "false"
    # In a session of its own the server misses a terminal's Ctrl-C, so it keeps serving
    # while the command records how it ended; flows.serve.api_server ends it if the command dies.
    process = subprocess.Popen(
        [
            sys.executable, "-m", "flows.serve.api_server", str(os.getpid()),
            "--app-dir", str(Path(prefect.__file__).parent.parent),
            "--factory", "prefect.server.api.server:create_app",
            "--host", bind, "--port", str(port),
            "--log-level", "error", "--lifespan", "on",
        ],
        env=env,
        start_new_session=True,
    )  # fmt: skip
    base = f"http://{advertise}:{port}"
    return Server(process, f"{base}/api", base if ui else None)


def flush_logs() -> None:
    """Send the log records still queued for the Prefect API (before its server stops)."""

    for logger in (logging.getLogger(n) for n in ("prefect", "prefect.flow_runs")):
        for handler in logger.handlers:
            if isinstance(handler, APILogHandler):
                handler.flush()
                return


def drain_to_api(timeout: float = 10.0) -> None:
    """Send what Prefect's background workers still hold (log records, events) while the
    API answers: at exit they would retry a stopped server for a minute and more."""

    for worker in (APILogWorker, EventsWorker):
        worker.drain_all(timeout=timeout, at_exit=False)


@contextmanager
def run_api(settings: Settings, while_starting: Callable[[], object]) -> Iterator[str | None]:
    """A Prefect API for one run; `while_starting` runs while a server starts.

    Yields the UI's address where one serves the API (None for a server started here).
    """

    if PREFECT_API_URL.value():
        while_starting()
        yield get_current_settings().ui_url
        return
    server = start_server(settings, cluster=settings.cluster)
    if server.api_url.split("//")[1].split(":")[0] != LOOPBACK:
        logging.getLogger("paperlake").warning(
            "Prefect API for the cluster's workers at %s, listening on every interface for "
            "this run (set PREFECT_API_URL to use a server of your own)",
            server.api_url,
        )
    try:
        while_starting()
        server.wait_healthy()
        # No UI here: no flow-run link that would lead nowhere.
        with temporary_settings(updates={PREFECT_API_URL: server.api_url, PREFECT_UI_URL: ""}):
            try:
                yield None
            finally:
                flush_logs()
    finally:
        server.stop()


@contextmanager
def persistent_api(settings: Settings, port: int) -> Iterator[tuple[str, str | None]]:
    """The API of PREFECT_API_URL, or a persistent server with UI started on `port`.

    Yields (API address, UI address); a server started here stops when the block ends.
    """

    if PREFECT_API_URL.value():
        yield PREFECT_API_URL.value(), get_current_settings().ui_url
        return
    server = start_server(settings, port=port, ui=True, cluster=settings.cluster)
    try:
        server.wait_healthy()
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            try:
                yield server.api_url, server.ui_url
            finally:
                drain_to_api()
    finally:
        server.stop()
