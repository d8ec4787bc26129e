"""The outside half of `serve`'s stop deadline: a small process that ends what is left of
`serve` when `serve` itself cannot.

`StopDeadline` (flows/core/stopping.py) starts it beside the command, in the command's
process group. It learns of a stop signal two ways: a signal to the group (Ctrl-C) reaches
it directly, and a signal to the command alone reaches it through the command's wakeup fd,
which is this process's standard input: the interpreter writes the signal's byte there
from its C signal handler, which runs even where no Python code of the command can (a
thread deadlocked holding the interpreter lock). It relays every byte to its standard
output, where the command's own watcher thread reads it. Once a stop signal came, it
gives the command `seconds` to end; then it kills every process below the command and
the command, and says so on standard error. It ends by itself when the command ends, or
closes standard input without a stop signal.

    python -m flows.core.watchdog PID SECONDS WHAT
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from pathlib import Path

from flows.core.stopping import STOP_SIGNALS, descendants


def state(pid: int) -> str | None:
    """The process's state letter (R, S, Z, ...); None where there is none."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    return state(pid) not in (None, "Z")


def stop_signal(relay: int) -> int | None:
    """The first stop signal, sent here or relayed from standard input (every byte of
    which goes on to `relay`); None once standard input closes without one."""
    got: list[int] = []
    for signum in STOP_SIGNALS:
        signal.signal(signum, lambda signum, frame: got.append(signum))
    os.write(relay, b"\0")  # ready: a stop signal from now on is seen
    while not got:
        ready, _, _ = select.select([0], [], [], 0.2)
        if not ready:
            continue
        data = os.read(0, 256)
        if not data:
            return None
        with contextlib.suppress(OSError):  # the watcher thread has gone
            os.write(relay, data)
        got += [byte for byte in data if byte in STOP_SIGNALS]
    return got[0]


def main(argv: list[str]) -> int:
    command, seconds, what = int(argv[1]), float(argv[2]), argv[3]
    signum = stop_signal(relay=1)
    if signum is None:
        return 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(command):
            return 0
        time.sleep(0.1)
    for pid in [*descendants(command), command]:
        if pid != os.getpid():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    name = signal.Signals(signum).name
    line = f"stopped: {what}, killed from outside: not ended {seconds:g} s after {name}\n"
    os.write(2, line.encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
