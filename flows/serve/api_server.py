"""The temporary Prefect server of one `paperlake run`: uvicorn that ends with its run.

`python -m flows.serve.api_server PARENT_PID UVICORN_ARGS...` serves like `uvicorn UVICORN_ARGS...`
and exits by itself once process PARENT_PID is no longer its parent, so a run that is
killed (SIGKILL included) and cannot stop its server leaves no server behind.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

# How often the server looks for its parent, and how long it then has to shut down cleanly.
POLL_SECONDS = 0.2
GRACE_SECONDS = 3.0


def watch_parent(parent: int) -> None:
    """Stop this process once `parent` has ended (the kernel then gives us a new parent)."""
    while os.getppid() == parent:
        time.sleep(POLL_SECONDS)
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's own graceful shutdown
    time.sleep(GRACE_SECONDS)
    os.kill(os.getpid(), signal.SIGKILL)  # it did not end: nothing is left to save


def main(argv: list[str]) -> None:
    """Watch the parent in a daemon thread, then run uvicorn's command line."""
    import importlib

    import uvicorn

    parent, *uvicorn_args = argv
    factory = uvicorn_args[uvicorn_args.index("--factory") + 1]
    importlib.import_module(factory.split(":")[0])  # the app's imports: most of the start
    threading.Thread(target=watch_parent, args=(int(parent),), daemon=True).start()
    uvicorn.main(args=uvicorn_args, prog_name="uvicorn")


if __name__ == "__main__":
    main(sys.argv[1:])
