"""A measured child process: the figures it prints last, as JSON, with its peak RSS."""

from __future__ import annotations

import json
import os
import subprocess


def child_figures(args: list[str], what: str = "child", **popen) -> dict:
    """Run `args`; the JSON object of its last line of output, plus `peak_rss_mb`.

    Raises:
        SystemExit: the child failed, naming `what` and its status.
    """
    child = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, **popen)
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{what} failed with status {status}")
    figures = json.loads(output.strip().splitlines()[-1])
    figures["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)  # ru_maxrss is in KiB on Linux
    return figures
