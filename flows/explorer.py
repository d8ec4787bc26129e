"""The explorer: a local web app over published versions (`paperlake explore`).

One process serves many requests: the DuckDB connections (one per version looked at) and
the query encoder stay open and warm, and what search reads of each version looked at is
held in memory (a search then reads no DuckLake table: 25-65 ms over HTTP on the sample
and 2 busy cores, against 120-135 ms when each search read the catalog). The page
(templates/explore/, static/explore/) is one HTML shell whose script draws search, paper
pages and the map from the JSON API under /api/; every asset is served from here, so it
works offline.
"""

from __future__ import annotations

import math
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from flows import search as searching
from flows.lake import (
    WarehouseError,
    open_lake,
    postgres_conninfo,
    published_versions,
    read_sql,
)
from flows.settings import Settings

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates" / "explore"
STATIC = HERE / "static"
MAX_HITS = 100
OPEN_VERSIONS = 4  # versions kept attached at once; the one looked at longest ago closes
IDLE_SECONDS = 20.0  # a DuckDB-file catalog is let go after this long without a request
MODES = searching.MODES
# What a listed paper shows besides its name (flows/search.py's hits).
CARD = ("paper_id", "authors", "venue", "year", "topic_id", "topic", "link", "code", "abstract")


class ExplorerError(Exception):
    """A request the explorer answers with `status` and a JSON body saying why."""

    def __init__(self, status: int, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


def records(frame: pl.DataFrame) -> list[dict]:
    """Rows as JSON-ready dicts (NaN and infinities as null)."""
    rows = frame.to_dicts()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, float) and not math.isfinite(value):
                row[key] = None
    return rows


@dataclass(frozen=True)
class Held:
    """What the explorer keeps in memory of a version it was asked about: what search reads
    (flows/search.py's Corpus) and each paper's name (sql/explore/names.sql)."""

    corpus: searching.Corpus
    names: pl.DataFrame


class Explorer:
    """The warehouse as the app reads it: a connection per version, opened on first use,
    and what search reads of each version, held in memory (`held`).

    DuckDB connections are not shared between threads, and FastAPI answers plain
    endpoints from a thread pool, so one lock serialises the work; a request costs
    milliseconds. Attaching a version costs about half a second, so connections stay
    open, but a DuckDB-file catalog that any process holds open cannot be written, so
    with one the connections close after IDLE_SECONDS without a request: a run that
    waits for the catalog (up to 60 s) gets it then. A PostgreSQL catalog never waits.
    What is held in memory stays (it holds no catalog), so searches need no connection.
    """

    def __init__(self, settings: Settings, version: int | None = None) -> None:
        self.settings = settings
        self.lock = threading.RLock()
        self.lakes: dict[int | None, duckdb.DuckDBPyConnection] = {}
        self.held: dict[int, Held] = {}
        self.used = time.monotonic()
        self.closed = threading.Event()
        versions = published_versions(self.lake_at(None))
        if version is not None and version not in versions:
            self.close()
            raise WarehouseError(
                f"version {version} is not a published version (published: "
                f"{', '.join(map(str, versions))})"
            )
        self.default_version = version if version is not None else versions[-1]
        if postgres_conninfo(settings) is None:
            threading.Thread(target=self.release_when_idle, name="idle", daemon=True).start()

    def lake_at(self, version: int | None) -> duckdb.DuckDBPyConnection:
        """The open connection at `version` (None: the latest, for the catalog's lists)."""
        self.used = time.monotonic()
        if version not in self.lakes:
            if len(self.lakes) > OPEN_VERSIONS:
                oldest = next(v for v in self.lakes if v is not None)
                self.lakes.pop(oldest).close()
            con = open_lake(self.settings, version, ("fts",))  # keyword search, no vss
            con.execute(read_sql("macros/paper_title"))
            self.lakes[version] = con
        self.lakes[version] = self.lakes.pop(version)  # most recently used last
        return self.lakes[version]

    def lake(self, version: int | None) -> duckdb.DuckDBPyConnection:
        """The connection reading `version` (default: the one the app started at)."""
        version = self.default_version if version is None else version
        if version not in self.lakes:
            published = published_versions(self.lake_at(None))
            if version not in published:
                raise ExplorerError(
                    404,
                    f"version {version} is not a published version (published: "
                    f"{', '.join(map(str, published))})",
                    version=version,
                )
        return self.lake_at(version)

    def release_when_idle(self) -> None:
        while not self.closed.wait(1.0):
            with self.lock:
                if self.lakes and time.monotonic() - self.used > IDLE_SECONDS:
                    self.release()

    def release(self) -> None:
        for con in self.lakes.values():
            con.close()
        self.lakes.clear()

    def close(self) -> None:
        with self.lock:
            self.closed.set()
            self.release()
            for held in self.held.values():
                held.corpus.close()
            self.held.clear()

    def warm(self) -> None:
        """Load the query encoder and what search reads before the first person asks."""
        with self.lock:
            self.hold(None).corpus.search("warm up", k=1)

    def hold(self, version: int | None) -> Held:
        """What search reads of `version` (default: the one the app started at), read into
        memory on first use; the version looked at longest ago goes past OPEN_VERSIONS."""
        version = self.resolved(version)
        if version not in self.held:
            con = self.lake(version)
            corpus = searching.Corpus(con, self.settings, held=True)
            names = con.execute(read_sql("explore/names"), {"ids": None}).pl()
            if len(self.held) >= OPEN_VERSIONS:
                self.held.pop(next(iter(self.held))).corpus.close()
            self.held[version] = Held(corpus, names)
        self.held[version] = self.held.pop(version)  # most recently used last
        return self.held[version]

    # What the API answers ---------------------------------------------------------------

    def versions(self) -> dict:
        with self.lock:
            rows = records(self.lake_at(None).execute(read_sql("explore/versions")).pl())
        return {"versions": rows, "default": self.default_version}

    def named(self, version: int | None, frame: pl.DataFrame) -> pl.DataFrame:
        """`frame` with each paper named for a person: `title` (its title, else its
        abstract's first words) and `untitled`."""
        names = self.hold(version).names
        return frame.drop("title", "untitled", strict=False).join(
            names, on="paper_id", how="left", maintain_order="left"
        )

    def listed(
        self, version: int | None, ranked: pl.DataFrame, keep: tuple[str, ...] = ()
    ) -> list[dict]:
        """The papers of `ranked` (paper_id first) as search lists them (authors, venue,
        year, topic, link, code, abstract; flows/search.py), with its columns `keep`."""
        if ranked.height == 0:
            return []
        listing = self.hold(version).corpus.listing(ranked["paper_id"].to_list())
        cards = listing.select(CARD)
        cards = cards.join(
            ranked.select("paper_id", *keep), on="paper_id", how="left", maintain_order="left"
        )
        return records(self.named(version, cards))

    def overview(self, version: int | None) -> dict:
        """What the front page shows before a search: counts, facets and topics."""
        with self.lock:
            con = self.lake(version)
            facets = con.execute(read_sql("explore/facets")).pl()
            topics = con.execute(read_sql("explore/map_topics")).pl()
            papers = con.execute("select count(*) from papers").fetchone()[0]
        return {
            "version": self.resolved(version),
            "papers": papers,
            "venues": records(facets.filter(facet="venue").drop("facet")),
            "years": records(facets.filter(facet="year").drop("facet")),
            "topics": records(topics.select("topic_id", "label", "papers")),
        }

    def resolved(self, version: int | None) -> int:
        return self.default_version if version is None else version

    def search(
        self,
        text: str,
        version: int | None = None,
        k: int = 10,
        mode: str = "hybrid",
        venue: str | None = None,
        year: int | None = None,
        topic: int | None = None,
    ) -> dict:
        """The k best papers for `text` in a version, as cards with their scores."""
        text = text.strip()
        if not text:
            raise ExplorerError(400, "give some words to search for")
        if mode not in MODES:
            raise ExplorerError(400, f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        k = max(1, min(k, MAX_HITS))
        started = time.perf_counter()
        with self.lock:
            found = self.hold(version).corpus.search(
                text, k=k, mode=mode, venue=venue, year=year, topic=topic
            )
            hits = records(self.named(version, found))
        weak = searching.no_good_match(found) if found.height else "nothing matches the filters"
        return {
            "query": text,
            "version": self.resolved(version),
            "mode": mode,
            "filters": {"venue": venue, "year": year, "topic": topic},
            "hits": hits,
            "no_good_match": weak is not None,
            "why": weak,
            "took_ms": round(1000 * (time.perf_counter() - started), 1),
        }

    def paper(self, paper_id: str, version: int | None = None) -> dict:
        """Everything the paper page shows: fields, links, topic, nearest papers,
        near-duplicates and the raw records it came from."""
        with self.lock:
            con = self.lake(version)
            rows = records(con.execute(read_sql("explore/paper"), {"paper_id": paper_id}).pl())
            if not rows:
                raise self.no_paper(paper_id, version)
            paper = rows[0]
            nearest = con.execute(read_sql("explore/nearest"), {"paper_id": paper_id}).pl()
            twins = con.execute(read_sql("explore/duplicates"), {"paper_id": paper_id}).pl()
            paper["nearest"] = self.listed(version, nearest, keep=("rank", "score"))
            paper["duplicates"] = self.listed(
                version, twins, keep=("score", "kind", "group_id", "group_size")
            )
            paper["sources"] = records(
                con.execute(read_sql("explore/provenance"), {"paper_id": paper_id}).pl()
            )
            [card] = (
                self.hold(version)
                .corpus.listing([paper_id])
                .select("link", "code")
                .rows(named=True)
            )
        paper["links"] = paper_links(paper | card)
        paper["version"] = self.resolved(version)
        return paper

    def no_paper(self, paper_id: str, version: int | None) -> ExplorerError:
        version = self.resolved(version)
        return ExplorerError(
            404, f"no paper {paper_id} in version {version}", paper_id=paper_id, version=version
        )

    def similar(self, paper_id: str, version: int | None = None, k: int = 10) -> dict:
        """The k papers closest to a paper by its embedding, searched now."""
        k = max(1, min(k, MAX_HITS))
        with self.lock:
            con = self.lake(version)
            try:
                found = searching.similar(con, paper_id, k)
            except ValueError:
                raise self.no_paper(paper_id, version) from None
            hits = records(self.named(version, found))
        return {"paper_id": paper_id, "version": self.resolved(version), "hits": hits}

    def topic(self, topic_id: int, version: int | None = None) -> dict:
        """A topic's label and terms, and its papers closest to its centre first."""
        with self.lock:
            con = self.lake(version)
            row = con.execute(
                "select label, papers, top_terms from topics where topic_id = ?", [topic_id]
            ).fetchone()
            if row is None:
                raise ExplorerError(
                    404, f"no topic {topic_id} in version {self.resolved(version)}",
                    topic_id=topic_id,
                )  # fmt: skip
            members = con.execute(read_sql("explore/topic_papers"), {"topic_id": topic_id}).pl()
            papers = self.listed(version, members, keep=("score",))
        label, size, terms = row
        return {
            "topic_id": topic_id, "label": label, "papers": size, "terms": terms,
            "version": self.resolved(version), "hits": papers,
        }  # fmt: skip

    def map(self, version: int | None = None) -> dict:
        """Every paper's place, topic and name, column by column, and the topics' labels."""
        with self.lock:
            con = self.lake(version)
            points = con.execute(read_sql("explore/map_points")).pl()
            topics = con.execute(read_sql("explore/map_topics")).pl()
        return {
            "version": self.resolved(version),
            "points": {
                "paper_id": points["paper_id"].to_list(),
                "x": points["x"].to_list(),
                "y": points["y"].to_list(),
                "topic_id": points["topic_id"].to_list(),
                "title": points["title"].to_list(),
            },
            "topics": records(topics),
        }


def paper_links(paper: dict) -> list[dict]:
    """The pages a paper can be opened at: its own page (as search links it), its code,
    then the other links in its abstract."""
    links = [{"url": paper["link"], "kind": "paper"}] if paper.get("link") else []
    if paper.get("code"):
        links.append({"url": paper["code"], "kind": "code"})
    seen = {link["url"] for link in links}
    for link in paper.get("links") or []:
        if link["url"] not in seen:
            links.append({"url": link["url"], "kind": link["kind"]})
            seen.add(link["url"])
    return links


def create_app(explorer: Explorer) -> FastAPI:
    """The FastAPI app over `explorer`: the page at / and /paper/<id>, the API at /api/."""
    app = FastAPI(title="paperlake explorer", docs_url=None, redoc_url=None, openapi_url=None)
    templates = Jinja2Templates(directory=str(TEMPLATES))
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    @app.exception_handler(ExplorerError)
    def explorer_error(request: Request, exc: ExplorerError) -> JSONResponse:
        return JSONResponse({"error": str(exc), **exc.detail}, status_code=exc.status)

    @app.exception_handler(WarehouseError)
    def warehouse_error(request: Request, exc: WarehouseError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=404)

    def page(request: Request) -> HTMLResponse:
        return templates.TemplateResponse(
            request, "index.html.j2", {"default_version": explorer.default_version}
        )

    app.get("/", response_class=HTMLResponse, include_in_schema=False)(page)
    app.get("/paper/{paper_id}", response_class=HTMLResponse, include_in_schema=False)(page)
    app.get("/topic/{topic_id}", response_class=HTMLResponse, include_in_schema=False)(page)

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
    ) -> dict:
        return explorer.search(q, version, k, mode, venue or None, year, topic)

    @app.get("/api/paper/{paper_id}")
    def paper(paper_id: str, version: int | None = None) -> dict:
        return explorer.paper(paper_id, version)

    @app.get("/api/similar/{paper_id}")
    def similar(paper_id: str, version: int | None = None, k: int = 10) -> dict:
        return explorer.similar(paper_id, version, k)

    @app.get("/api/topic/{topic_id}")
    def topic(topic_id: int, version: int | None = None) -> dict:
        return explorer.topic(topic_id, version)

    @app.get("/api/map")
    def paper_map(version: int | None = None) -> dict:
        return explorer.map(version)

    @app.get("/api/{rest:path}", include_in_schema=False)
    def unknown(rest: str) -> dict:
        raise ExplorerError(404, f"no API endpoint /api/{rest}")

    return app


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
    import uvicorn

    config = uvicorn.Config(create_app(explorer), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    stopped: list[int] = []

    def note(signum: int, frame: object) -> None:
        stopped.append(signum)
        server.should_exit = True

    before = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        ready()
        server.run(sockets=[sock])
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        sock.close()
        explorer.close()
    return stopped[0] if stopped else None
