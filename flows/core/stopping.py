"""Stopping a command on SIGTERM or Ctrl-C: within seconds, with one line, nothing half-done.

The signal unwinds the main thread as an exception, so the warehouse lock is released, an
open publish transaction rolls back, Prefect marks the flow run crashed and the temporary
Prefect server stops, as on any error. Torch, DuckDB and Prefect each report an interrupt
their own way (DuckDB raises RuntimeError; inside a flow Prefect turns SIGTERM into its
TerminationSignal and logs the crash, with a traceback when DuckDB has converted it), so a
thread that learns of the signal from the wakeup fd, wherever the main thread is, says the
one line at once, silences what follows, and ends the process if unwinding takes more
than GRACE_SECONDS. Ending anywhere is safe: a DuckLake commit is atomic and the caches
are renamed into place.

`serve` stops the way Prefect's runner does (cancelling a flow run in progress), under a
StopDeadline: whatever of it has not ended SERVE_STOP_SECONDS after the signal is killed.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE_SECONDS = 5.0
# What the one line adds for a command that publishes.
PUBLISH_NOTE = (
    "a version is published whole or not at all: `paperlake versions` shows the current one"
)
# How long `serve` may take to stop by itself before what is left of it is killed: its
# promise is no process left 10 s after the signal, also on a busy machine.
SERVE_STOP_SECONDS = 7.0
# How much longer the watchdog process gives it before it kills what is left from outside.
WATCHDOG_SECONDS = 1.5
WATCHDOG_START_SECONDS = 10.0  # at most, on a busy machine (it starts in about 0.05 s)


def not_a_termination(record: logging.LogRecord) -> bool:
    """False for Prefect's records of a run aborted by a termination signal."""
    return "aborted by a termination signal" not in record.getMessage()


class Stopped(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; args[0] is its number."""


class SignalStop:
    """While entered, in the main thread, SIGINT and SIGTERM stop the work as described above.

    The wakeup fd gets a byte for every signal before the main thread runs its handler, so
    once the main thread sees an exception that a signal raised, `received()` knows it.
    """

    def __init__(self, what: str, note: str = PUBLISH_NOTE) -> None:
        self.what = what
        self.note = note
        self.signum: int | None = None
        self.ended = False
        self.lock = threading.Lock()

    def __enter__(self) -> SignalStop:
        # Prefect's own SIGTERM handler logs the stop as a task or flow crash before ours
        # runs (as prefect.engine while a task run is still being set up); the one line
        # says it, so those records are dropped.
        for name in ("prefect.task_runs", "prefect.flow_runs", "prefect.engine"):
            logging.getLogger(name).addFilter(not_a_termination)
        self.receiver, self.sender = socket.socketpair()
        self.receiver.setblocking(False)
        self.sender.setblocking(False)
        self.handlers = {s: signal.signal(s, self.raise_stopped) for s in STOP_SIGNALS}
        self.wakeup = signal.set_wakeup_fd(self.sender.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self.watch, name="signal-stop", daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        signal.set_wakeup_fd(self.wakeup)
        for signum, handler in self.handlers.items():
            signal.signal(signum, handler)
        self.received()
        self.ended = True
        self.sender.close()  # wakes the watcher, which ends unless a stop is under way

    def raise_stopped(self, signum: int, frame: object) -> None:
        # Say the one line (and silence what follows) before raising: raised inside a task,
        # the stop is at once logged by Prefect as a crash, before the watcher thread runs.
        self.received()
        raise Stopped(signum)

    def received(self) -> int | None:
        """The stop signal that arrived, if any; whoever sees it first announces it."""
        with self.lock:
            if self.signum is None:
                try:
                    data = self.receiver.recv(256)
                except BlockingIOError:
                    data = b""
                stops = [byte for byte in data if byte in STOP_SIGNALS]
                if stops:
                    self.signum = stops[0]
                    self.announce()
            return self.signum

    def announce(self) -> None:
        """Write the one line, then send whatever else this process writes to /dev/null."""
        stdout, stderr = os.dup(1), os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        for fd in (stdout, stderr):
            if os.isatty(fd):
                os.write(fd, b"\x1b[?25h")  # a progress bar may have hidden the cursor
        name = signal.Signals(self.signum).name
        line = f"error: {self.what} stopped by {name}; {self.note}\n"
        if os.isatty(stderr):
            line = "\n" + line  # ends the line that ^C or a progress bar left open
        os.write(stderr, line.encode())
        os.close(stdout)
        os.close(stderr)

    def watch(self) -> None:
        """Wait for a stop signal; then give the main thread GRACE_SECONDS to unwind."""
        while self.received() is None:
            if self.ended:
                self.receiver.close()
                return
            select.select([self.receiver], [], [], 0.2)  # or the main thread took the byte
        time.sleep(GRACE_SECONDS)
        os._exit(128 + self.signum)


def stops_on_signals(
    command: Callable[..., Any] | None = None, *, note: str = PUBLISH_NOTE
) -> Callable[..., Any]:
    """Run `command` under SignalStop; a stopped command exits with 128 + the signal.

    Used bare (`@stops_on_signals`) or with the `note` its one line ends with.
    """
    if command is None:
        return functools.partial(stops_on_signals, note=note)

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return command(*args, **kwargs)  # only the main thread may handle signals
        with SignalStop(command.__name__, note) as stop:
            try:
                result = command(*args, **kwargs)
            except BaseException:
                if stop.received() is None:
                    raise
        if stop.signum is None:
            return result
        raise SystemExit(128 + stop.signum)

    return wrapper


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (its children, theirs, ...), from /proc; none without it."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # it ended while listed
            continue
        parents.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        below = parents.get(todo.pop(), [])
        found += below
        todo += below
    return found


class StopDeadline:
    """While entered, in the main thread: once SIGINT or SIGTERM arrives, however this
    process handles it (Prefect's runner has its own handler, which cancels a flow run in
    progress and may wait 30 s for it), this process and every process below it end
    within `seconds`: what is still running then is killed, and this process exits with
    128 + the signal after saying so. A signal that came while entered holds the deadline
    past the block too: the process may still hang on its way out (a thread joined at
    exit, a child whose stop the signal cut short).

    It learns of the signal from the wakeup fd, whichever handler runs. The wakeup fd is
    a pipe to a watchdog process (flows/core/watchdog.py), which relays each byte to this
    process's watcher thread, and kills what is left WATCHDOG_SECONDS later where this
    process cannot do it itself (a thread deadlocked holding the interpreter lock stops
    every thread here, the watcher too).
    """

    def __init__(self, what: str, seconds: float = SERVE_STOP_SECONDS) -> None:
        self.what = what
        self.seconds = seconds
        self.left = threading.Event()

    def __enter__(self) -> StopDeadline:
        wake, self.wake = os.pipe()
        self.relayed, relay = os.pipe()
        command = [sys.executable, "-m", "flows.core.watchdog", str(os.getpid()),
                   str(self.seconds + WATCHDOG_SECONDS), self.what]  # fmt: skip
        self.watchdog = subprocess.Popen(command, stdin=wake, stdout=relay)
        os.close(wake)
        os.close(relay)
        # Its first byte says it is ready (a signal before would end it unseen).
        if select.select([self.relayed], [], [], WATCHDOG_START_SECONDS)[0]:
            os.read(self.relayed, 1)
        os.set_blocking(self.wake, False)
        self.wakeup = signal.set_wakeup_fd(self.wake, warn_on_full_buffer=False)
        threading.Thread(target=self.watch, name="stop-deadline", daemon=True).start()
        # A process that exits as it should takes its watchdog with it; one that hangs on
        # its way out (joining its threads) never gets here, and the watchdog ends it.
        atexit.register(self.end_watchdog)
        return self

    def __exit__(self, *exc_info: object) -> None:
        signal.set_wakeup_fd(self.wakeup)
        self.left.set()

    def watch(self) -> None:
        """Wait for a stop signal (until the block is left and none came); then give the
        process `seconds` to end by itself."""
        signum = self.signal_received()
        if signum is None:  # the wakeup fd is restored: the watchdog may go
            os.close(self.wake)
            os.close(self.relayed)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.watchdog.wait(timeout=5)
            return
        time.sleep(self.seconds)  # the process ends before, taking this thread with it
        for pid in descendants(os.getpid()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        name = signal.Signals(signum).name
        line = f"stopped: {self.what}, killed: not ended {self.seconds:.0f} s after {name}\n"
        os.write(2, line.encode())
        os._exit(128 + signum)

    def end_watchdog(self) -> None:
        """Stop the watchdog and wait for it (at the exit of a process that ends)."""
        self.watchdog.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.watchdog.wait(timeout=5)

    def signal_received(self) -> int | None:
        """The stop signal the watchdog relays; None once the block is left without one
        (read once more after leaving: the signal may have come just before), or where
        the watchdog has gone."""
        while True:
            left = self.left.is_set()
            ready, _, _ = select.select([self.relayed], [], [], 0.2)
            if not ready:
                if left:
                    return None
                continue
            data = os.read(self.relayed, 256)
            if not data:  # the watchdog ended: nothing more can come, the fds stay till then
                self.left.wait()
                return None
            signum = next((byte for byte in data if byte in STOP_SIGNALS), None)
            if signum is not None:
                return signum


def stops_within(what: str, seconds: float = SERVE_STOP_SECONDS) -> Callable[..., Any]:
    """Run a command under StopDeadline(what, seconds) (in the main thread)."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is not threading.main_thread():
                return command(*args, **kwargs)  # only the main thread may set the wakeup fd
            with StopDeadline(what, seconds):
                return command(*args, **kwargs)

        return wrapper

    return decorate
