"""The warm runner: `paperlake serve` runs the flow for `paperlake run` in its own process.

A `paperlake run` in a fresh process spends most of a small run importing Prefect, Great
Expectations and the stages and loading the model, far more than the work of one new
abstract. `serve` has all of that in memory already, so it
also listens on a loopback port for runs of its warehouse: `paperlake run` finds the
port in warehouse/prefect/runner.json, hands over its flow parameters, prints the log
lines as they come and then the run's summary. Runs are real Prefect flow runs on the
serve's API, one at a time (the warehouse lock orders them with scheduled runs too).

The connection is Python's multiprocessing.connection: a client proves it knows the
random key in runner.json (readable by its owner only) before anything is read from it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import secrets
import socket
import threading
import traceback
from collections.abc import Callable
from dataclasses import asdict
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any

from flows.core.settings import Settings

LOG_LOGGERS = ("prefect", "paperlake")


class HandedOverError(RuntimeError):
    """A run handed to the warm runner ended with an error; `kind` says which."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # data-quality | failed | crashed


def runner_file(warehouse: Path) -> Path:
    """Where a serving process writes the address and key of its warm runner."""
    return warehouse.resolve() / "prefect" / "runner.json"


class LineSender(logging.Handler):
    """Sends each log record of a handed-over run to its client, formatted as the
    serving process's console shows it."""

    def __init__(self, conn: Connection, formatter: logging.Formatter):
        super().__init__(level=logging.INFO)
        self.conn = conn
        self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(OSError, ValueError):  # a client gone: the run goes on
            self.conn.send({"log": self.format(record)})


def console_formatter() -> logging.Formatter:
    """Prefect's console format, so handed-over lines read as a run's own would."""
    from prefect.logging.formatters import PrefectFormatter

    return PrefectFormatter(
        format="%(asctime)s.%(msecs)03d | %(levelname)-7s | %(name)s - %(message)s",
        flow_run_fmt="%(asctime)s.%(msecs)03d | %(levelname)-7s | Flow run %(flow_run_name)r"
        " - %(message)s",
        task_run_fmt="%(asctime)s.%(msecs)03d | %(levelname)-7s | Task run %(task_run_name)r"
        " - %(message)s",
        datefmt="%H:%M:%S",
    )


class WarmRunner:
    """Takes runs of one warehouse from `paperlake run` while entered (see the module)."""

    def __init__(self, warehouse: Path, execute: Callable[[dict[str, Any]], Any]):
        """Args:
        execute: runs the flow with the given parameters and returns its summary (a
            dataclass); it is called in the runner's threads, one call at a time.
        """
        self.path = runner_file(warehouse)
        self.execute = execute
        self.key = secrets.token_bytes(32)
        self.one_at_a_time = threading.Lock()
        self.listener: Listener | None = None
        self.context: contextvars.Context | None = None

    def __enter__(self) -> WarmRunner:
        # Runs see the settings in force here (the serve's PREFECT_API_URL among them),
        # not the process-wide ones a new thread would start with.
        self.context = contextvars.copy_context()
        self.listener = Listener(("127.0.0.1", 0), authkey=self.key)
        host, port = self.listener.address
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump({"pid": os.getpid(), "host": host, "port": port, "key": self.key.hex()},
                      handle)  # fmt: skip
        os.replace(tmp, self.path)
        threading.Thread(target=self.accept, name="warm-runner", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if json.loads(self.path.read_text()).get("pid") == os.getpid():
                self.path.unlink()
        except (OSError, ValueError):
            pass
        if self.listener is not None:
            self.listener.close()

    def accept(self) -> None:
        while True:
            try:
                conn = self.listener.accept()
            except OSError:  # closed: serve is stopping
                return
            except Exception:  # a client without the key; it is not answered
                continue
            send_at_once(conn)
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn: Connection) -> None:
        """Run one handed-over request: stream its log lines, then its outcome."""
        with conn:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                return
            if not self.one_at_a_time.acquire(blocking=False):
                conn.send({"log": "waiting for the run in progress in paperlake serve"})
                self.one_at_a_time.acquire()
            sender = LineSender(conn, console_formatter())
            for name in LOG_LOGGERS:
                logging.getLogger(name).addHandler(sender)
            try:
                summary = self.context.copy().run(self.execute, request["parameters"])
                reply = {"summary": asdict(summary)}
            except Exception as exc:  # every outcome goes back to the client, which says it
                reply = {"error": error_kind(exc), "message": str(exc)}
                if reply["error"] == "crashed":
                    reply["message"] = "".join(traceback.format_exception(exc)).rstrip()
            finally:
                for name in LOG_LOGGERS:
                    logging.getLogger(name).removeHandler(sender)
                self.one_at_a_time.release()
            with contextlib.suppress(OSError, ValueError):
                conn.send(reply)


def error_kind(exc: BaseException) -> str:
    """How the client reports an error of a handed-over run."""
    from flows.core.lake import WarehouseError
    from flows.serve.prefect_server import ServerError
    from flows.validate import DataQualityError

    if isinstance(exc, DataQualityError):
        return "data-quality"
    if isinstance(exc, FileNotFoundError | ValueError | WarehouseError | ServerError | OSError):
        return "failed"
    return "crashed"


def send_at_once(conn: Connection) -> None:
    """Turn off Nagle's algorithm on the connection's socket. The key's handshake ends with
    the client's message, so the request that follows it would wait for the server's
    delayed acknowledgement."""
    with socket.socket(fileno=os.dup(conn.fileno())) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def find(settings: Settings) -> tuple[tuple[str, int], bytes] | None:
    """The address and key of a warm runner serving `settings`' warehouse, if one runs."""
    path = runner_file(settings.warehouse)
    try:
        found = json.loads(path.read_text())
        os.kill(int(found["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (found["host"], int(found["port"])), bytes.fromhex(found["key"])


def hand_over(
    settings: Settings, parameters: dict[str, Any], say: Callable[[str], object]
) -> dict[str, Any] | None:
    """Send a run to the warm runner of `settings`' warehouse; None where none answers.

    Each log line of the run goes to `say` as it comes; returns the run's summary fields,
    or raises HandedOverError with the run's error.
    """
    found = find(settings)
    if found is None:
        return None
    address, key = found
    try:
        conn = Client(address, authkey=key)
    except (OSError, EOFError):
        return None
    send_at_once(conn)
    with conn:
        conn.send({"parameters": parameters})
        while True:
            try:
                message = conn.recv()
            except EOFError:
                raise HandedOverError("crashed", "paperlake serve ended during the run") from None
            if "log" in message:
                say(message["log"])
            elif "summary" in message:
                return message["summary"]
            else:
                raise HandedOverError(message["error"], message["message"])
