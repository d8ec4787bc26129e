"""`paperlake explore` on a warehouse in its own process, for the benches that measure it."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def explorer(warehouse: str, stop_within: float = 60) -> Iterator[tuple[str, subprocess.Popen]]:
    """The explorer started on a free port: its base URL and its process, stopped (SIGINT,
    as Ctrl-C) on leaving."""
    command = [sys.executable, "-m", "flows.cli", "explore", "-w", warehouse, "--port", "0"]
    server = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        found = re.search(r"(http://\S+/)", server.stdout.readline())
        if not found:
            sys.exit("the explorer did not start")
        yield found.group(1), server
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=stop_within)
