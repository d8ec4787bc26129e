"""Serve: what keeps running for people and schedules.

Offers the Prefect API a command talks to (`run_api` for one run, `persistent_api` with
its UI for `paperlake serve`), the warm runner that takes `paperlake run` into a serving
process (`WarmRunner`, `hand_over`), and the explorer, a local web app over published
versions (`Explorer`, and `listen` / `serve_explorer` for its app).
"""

from flows.serve.explorer import Explorer
from flows.serve.explorer_app import listen, url_of
from flows.serve.explorer_app import serve as serve_explorer
from flows.serve.prefect_server import (
    ServerError,
    free_port,
    next_run_times,
    persistent_api,
    port_in_use,
    run_api,
)
from flows.serve.warm_runner import HandedOverError, WarmRunner, hand_over

__all__ = [
    "Explorer",
    "HandedOverError",
    "ServerError",
    "WarmRunner",
    "free_port",
    "hand_over",
    "listen",
    "next_run_times",
    "persistent_api",
    "port_in_use",
    "run_api",
    "serve_explorer",
    "url_of",
]
