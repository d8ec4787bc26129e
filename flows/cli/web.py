"""The explorer command: a version of the warehouse in the browser."""

from __future__ import annotations

from typing import Annotated

import typer

from flows.cli.options import setting_options
from flows.cli.output import fail, out
from flows.core.errors import WarehouseError
from flows.core.settings import Settings

DEFAULT_PORT = 8765


@setting_options("warehouse", "catalog", "data_path", "model")
def explore(
    port: Annotated[
        int, typer.Option(help="Port to serve on (0: any free port).", min=0, max=65535)
    ] = DEFAULT_PORT,
    host: Annotated[
        str, typer.Option(help="Address to listen on (127.0.0.1: this machine only).")
    ] = "127.0.0.1",
    version: Annotated[
        int | None, typer.Option("--version", help="Version shown first (default: latest).")
    ] = None,
    *,
    settings: Settings,
) -> None:
    """Explore a version in the browser: search with filters, paper pages with their
    nearest papers, near-duplicates and raw records, a map of papers by topic, and every
    published version. Serves until Ctrl-C or SIGTERM; works offline."""
    from flows.serve import Explorer, listen, serve_explorer, url_of

    try:
        explorer = Explorer(settings, version)
    except WarehouseError as exc:
        fail(str(exc))
    try:
        sock = listen(host, port)
    except OSError as exc:
        explorer.close()
        fail(f"cannot listen on {host}:{port} ({exc.strerror}); choose another with --port")
    try:
        explorer.warm()
    except (WarehouseError, ValueError) as exc:  # search needs the query model
        out.print(f"warning: search will not work: {exc}", highlight=False)
    serve_explorer(
        explorer,
        sock,
        ready=lambda: out.print(
            f"paperlake explorer: {url_of(sock)}  (version {explorer.default_version}; "
            "Ctrl-C or SIGTERM stops it)",
            highlight=False,
        ),
    )
    out.print("stopped: the explorer", highlight=False)
