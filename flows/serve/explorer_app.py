"""The explorer's web app: the FastAPI app over an Explorer (flows/serve/explorer.py) and the
uvicorn server that answers on a socket until SIGINT or SIGTERM."""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable
from pathlib import Path

import duckdb
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from flows.core import damage
from flows.core.errors import WarehouseError
from flows.core.explorers import announced
from flows.serve.explorer import Explorer, ExplorerError
from flows.serve.explorer_hits import ARROW, as_arrow, command_hits, said

HERE = Path(__file__).parents[1]  # flows/: its templates/ and static/
TEMPLATES = HERE / "templates" / "explore"
STATIC = HERE / "static"


def create_app(explorer: Explorer) -> FastAPI:
    """The FastAPI app over `explorer`: the page at /, /paper/<id>, /topic/<id>,
    /author/<key> and /venue/<name>, the API at /api/."""
    app = FastAPI(title="paperlake explorer", docs_url=None, redoc_url=None, openapi_url=None)
    templates = Jinja2Templates(directory=str(TEMPLATES))
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    @app.exception_handler(ExplorerError)
    def explorer_error(request: Request, exc: ExplorerError) -> JSONResponse:
        return JSONResponse({"error": str(exc), **exc.detail}, status_code=exc.status)

    @app.exception_handler(WarehouseError)
    def warehouse_error(request: Request, exc: WarehouseError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=404)

    @app.exception_handler(duckdb.Error)
    def damaged(request: Request, exc: duckdb.Error) -> JSONResponse:
        """A data file gone or the catalog damaged: one line naming it (`damage.told`)."""
        told = damage.told(exc)
        if told is None:
            raise exc
        return JSONResponse({"error": str(told)}, status_code=503)

    def page(request: Request) -> HTMLResponse:
        default = explorer.versions()["default"]  # a version published since included
        return templates.TemplateResponse(request, "index.html.j2", {"default_version": default})

    app.get("/", response_class=HTMLResponse, include_in_schema=False)(page)
    app.get("/paper/{paper_id}", response_class=HTMLResponse, include_in_schema=False)(page)
    app.get("/topic/{topic_id}", response_class=HTMLResponse, include_in_schema=False)(page)
    app.get("/author/{key:path}", response_class=HTMLResponse, include_in_schema=False)(page)
    app.get("/venue/{name:path}", response_class=HTMLResponse, include_in_schema=False)(page)
    add_api(app, explorer)
    add_map_api(app, explorer)

    @app.get("/api/{rest:path}", include_in_schema=False)  # after every endpoint: none matched
    def unknown(rest: str) -> dict:
        raise ExplorerError(404, f"no API endpoint /api/{rest}")

    return app


def add_api(app: FastAPI, explorer: Explorer) -> None:
    """The JSON API under /api/: each endpoint answers with what `explorer` says."""

    @app.get("/api/versions")
    def versions() -> dict:
        return explorer.versions()

    @app.get("/api/overview")
    def overview(version: int | None = None) -> dict:
        return explorer.overview(version)

    @app.get("/api/search")
    def search(
        q: str = "",
        version: int | None = None,
        k: int = 10,
        mode: str = "hybrid",
        venue: str | None = None,
        year: int | None = None,
        topic: int | None = None,
        sort: str = "relevance",
        offset: int = 0,
    ) -> dict:
        filters = {"venue": venue or None, "year": year, "topic": topic}
        return explorer.search(q, version, k, mode, filters, sort, offset)

    @app.get("/api/hits")
    def hits(
        q: str,
        version: int | None = None,
        k: int = 10,
        mode: str = "hybrid",
        venue: str | None = None,
        year: int | None = None,
        topic: str | None = None,
        fusion: str = "score",
        min_cosine: float | None = None,
    ) -> Response:
        """`paperlake search` handed over (flows/core/explorers.py): its hits as Arrow."""
        found, version, weak = command_hits(
            explorer, q, version, k, mode, venue, year, topic, fusion, min_cosine
        )
        headers = {"paperlake-version": str(version), "paperlake-no-good-match": said(weak)}
        return Response(as_arrow(found), media_type=ARROW, headers=headers)

    @app.get("/api/papers")
    def papers(
        version: int | None = None,
        venue: str | None = None,
        year: int | None = None,
        topic: int | None = None,
        author: str | None = None,
        sort: str | None = None,
        offset: int = 0,
        k: int = 20,
    ) -> dict:
        filters = {"venue": venue or None, "year": year, "topic": topic, "author": author or None}
        return explorer.papers(version, filters, sort or None, offset, k)

    @app.get("/api/author/{key:path}")
    def author(key: str, version: int | None = None) -> dict:
        return explorer.author(key, version)

    @app.get("/api/venue/{name:path}")
    def venue(name: str, version: int | None = None) -> dict:
        return explorer.venue(name, version)

    @app.get("/api/paper/{paper_id}")
    def paper(paper_id: str, version: int | None = None) -> dict:
        return explorer.paper(paper_id, version)

    @app.get("/api/similar/{paper_id}")
    def similar(paper_id: str, version: int | None = None, k: int = 10) -> dict:
        return explorer.similar(paper_id, version, k)

    @app.get("/api/topic/{topic_id}")
    def topic(topic_id: int, version: int | None = None) -> dict:
        return explorer.topic(topic_id, version)


def add_map_api(app: FastAPI, explorer: Explorer) -> None:
    """The map's endpoints: /api/map, the map in binary (flows/serve/explorer_map.py), and
    the papers at its indexes and the indexes of papers."""

    @app.get("/api/map")
    def paper_map(version: int | None = None) -> Response:
        # A number or two a paper, a million papers: columns of numbers (`packed`), which
        # the page reads as they come, without parsing them.
        return Response(explorer.map(version), media_type="application/octet-stream")

    @app.get("/api/map/paper/{index}")
    def mapped(index: int, version: int | None = None) -> dict:
        return explorer.mapped(index, version)

    @app.get("/api/map/indexes")
    def map_indexes(ids: str = "", version: int | None = None) -> dict:
        """Where the papers `ids` (comma-separated) lie in the map's order."""
        return explorer.map_indexes([i for i in ids.split(",") if i], version)


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: any free port).

    Raises:
        OSError: the port is taken or the host is not this machine's.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


def serve(explorer: Explorer, sock: socket.socket, ready: Callable[[], object]) -> int | None:
    """Serve the explorer on `sock` until SIGINT or SIGTERM; the signal that stopped it.

    The app is built and a handler that notes a stop signal is set before `ready` (which
    tells the address), so no signal is lost between the two. uvicorn then stops
    gracefully on either signal (open requests finish) and raises it again for the
    handler that was there before it: the noting one.
    """

    config = uvicorn.Config(create_app(explorer), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    stopped: list[int] = []

    def note(signum: int, frame: object) -> None:
        stopped.append(signum)
        server.should_exit = True

    before = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        # Said before the address is told: the socket listens already, and whoever reads
        # the address finds the note (`paperlake search`).
        with announced(explorer.settings, url_of(sock)):
            ready()
            server.run(sockets=[sock])
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        sock.close()
        explorer.close()
    return stopped[0] if stopped else None
