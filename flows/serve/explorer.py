"""The explorer: a local web app over published versions (`paperlake explore`).

One process serves many requests: the DuckDB connections (one per version looked at) and the
query encoder stay warm, and what search reads of each version looked at is kept open
(explorer_held.py).
With the DuckDB-file catalog the connections read a copy of it (flows/read/catalog_copy.py),
so runs publish while the explorer serves, and the next request reads what they published.
The page (templates/explore/, static/explore/) is one HTML shell whose scripts draw search,
lists, the pages of papers, topics, authors and venues, and the map from the JSON API under
/api/ (explorer_app.py, explorer_pages.py, explorer_map.py), all served from here: offline.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import duckdb
import polars as pl

from flows.core.lake import (
    ATTACH_WAIT_SECONDS,
    WarehouseError,
    open_lake,
    published_versions,
    read_sql,
)
from flows.core.settings import Settings
from flows.read import MODES, no_good_match, reader_of, similar_papers
from flows.serve.explorer_held import Held
from flows.serve.explorer_map import MapOrder
from flows.serve.explorer_pages import (
    SEARCH_SORTS,
    BadRequest,
    author_page,
    browse,
    checked_page,
    paper_links,
    records,
    sorted_hits,
    venue_page,
)

MAX_HITS = 100  # a search ranks this many papers once, and pages through them
SEARCHES = 8  # searches kept ranked, for their next pages
OPEN_VERSIONS = 4  # versions kept attached at once; the one looked at longest ago closes
GONE = "Cannot open file"  # DuckDB's words for a data file that is not there
T = TypeVar("T")
# What a listed paper shows besides its name (flows/read/hits.py).
CARD = ("paper_id", "authors", "venue", "year", "topic_id", "topic", "link", "code", "abstract")


class ExplorerError(Exception):
    """A request the explorer answers with `status` and a JSON body saying why."""

    def __init__(self, status: int, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


def answered(method: Callable[..., T]) -> Callable[..., T]:
    """An Explorer's request: answered alone (one lock), on the catalog as it is now, and
    once more on a new copy of the catalog where a data file that the last copy reads is
    gone (`compact` removed it since; a run holding the catalog is waited for)."""

    @functools.wraps(method)
    def answer(self: Explorer, *args: Any, **kwargs: Any) -> T:
        with self.lock:
            self.refresh()
            try:
                return method(self, *args, **kwargs)
            except duckdb.IOException as exc:
                if GONE not in str(exc) or not self.refresh(wait=ATTACH_WAIT_SECONDS):
                    raise
            except BadRequest as exc:
                raise ExplorerError(400, str(exc)) from None
            except LookupError as exc:
                raise ExplorerError(404, str(exc)) from None
            return method(self, *args, **kwargs)

    return answer


class Explorer:
    """The warehouse as the app reads it: a connection per version, opened on first use,
    and what search reads of each version, held in memory (`held`).

    DuckDB connections are not shared between threads, and FastAPI answers plain endpoints
    from a thread pool, so one lock serialises the work (`answered`); connections stay open
    (attaching a version costs 0.1 s and more). A DuckDB-file catalog that any process holds
    open cannot be written, so they read a copy of it (`copy`), taken anew at the first
    request after a run changed the catalog; a PostgreSQL catalog is read as it is. Without
    `version` the app shows the latest version, a new one once it is published.
    """

    def __init__(self, settings: Settings, version: int | None = None) -> None:
        self.settings = settings
        self.lock = threading.RLock()
        self.lakes: dict[int | None, duckdb.DuckDBPyConnection] = {}
        self.held: dict[int, Held] = {}
        self.searches: dict[tuple, pl.DataFrame] = {}  # the last SEARCHES searches' hits
        self.maps = MapOrder(OPEN_VERSIONS)  # the map's order of the versions looked at last
        self.copy = reader_of(settings)
        try:
            versions = published_versions(self.lake_at(None))
        except BaseException:
            self.close()
            raise
        if version is not None and version not in versions:
            self.close()
            raise WarehouseError(
                f"version {version} is not a published version (published: "
                f"{', '.join(map(str, versions))})"
            )
        self.pinned = version
        self.latest = versions[-1]

    @property
    def default_version(self) -> int:
        """The version a request without one reads: --version, else the latest."""
        return self.latest if self.pinned is None else self.pinned

    def refresh(self, wait: float = 0.0) -> bool:
        """Read a new copy of a DuckDB-file catalog once a run changed it (waiting up to
        `wait` seconds for a run that holds it); whether one was taken. Connections to the
        last copy close, and versions held in memory that are no longer published go."""
        if self.copy is None or not self.copy.take(wait):
            return False
        self.release()
        self.copy.prune()
        published = published_versions(self.lake_at(None))
        for version in [v for v in self.held if v not in published]:
            self.held.pop(version).corpus.close()
        self.searches.clear()
        self.latest = published[-1]
        return True

    def lake_at(self, version: int | None) -> duckdb.DuckDBPyConnection:
        """The open connection at `version` (None: the latest, for the catalog's lists)."""
        if version not in self.lakes:
            if len(self.lakes) > OPEN_VERSIONS:
                oldest = next(v for v in self.lakes if v is not None)
                self.lakes.pop(oldest).close()
            reading = self.settings if self.copy is None else self.copy.reading
            con = open_lake(reading, version, ("fts",))  # keyword search, no vss
            con.execute(read_sql("macros/paper_title"))
            self.lakes[version] = con
        self.lakes[version] = self.lakes.pop(version)  # most recently used last
        return self.lakes[version]

    def lake(self, version: int | None) -> duckdb.DuckDBPyConnection:
        """The connection reading `version` (default: the one the app shows first)."""
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

    def release(self) -> None:
        for con in self.lakes.values():
            con.close()
        self.lakes.clear()

    def close(self) -> None:
        with self.lock:
            self.release()
            for held in self.held.values():
                held.corpus.close()
            self.held.clear()
            if self.copy is not None:
                self.copy.close()

    @answered
    def warm(self) -> None:
        """Load the query encoder and what search reads before the first person asks."""
        self.hold(None).corpus.search("warm up", k=1)

    def hold(self, version: int | None) -> Held:
        """What the explorer keeps of `version` (default: the one the app shows), read on
        first use; the version looked at longest ago goes past OPEN_VERSIONS."""
        version = self.resolved(version)
        if version not in self.held:
            held = Held.read(self.lake(version), self.settings)
            if len(self.held) >= OPEN_VERSIONS:
                self.held.pop(next(iter(self.held))).corpus.close()
            self.held[version] = held
        self.held[version] = self.held.pop(version)  # most recently used last
        return self.held[version]

    # What the API answers ---------------------------------------------------------------

    @answered
    def versions(self) -> dict:
        rows = records(self.lake_at(None).execute(read_sql("explore/versions")).pl())
        if self.copy is None and rows:  # a PostgreSQL catalog: read as it is now
            self.latest = max(row["version"] for row in rows)
        return {"versions": rows, "default": self.default_version}

    def named(self, version: int | None, frame: pl.DataFrame) -> pl.DataFrame:
        """`frame` with each paper named for a person (`Held.named`)."""
        return self.hold(version).named(frame)

    def listed(
        self, version: int | None, ranked: pl.DataFrame, keep: tuple[str, ...] = ()
    ) -> list[dict]:
        """The papers of `ranked` (paper_id first) as search lists them (authors, venue,
        year, topic, link, code, abstract; flows/read/hits.py), with its columns `keep`."""
        if ranked.height == 0:
            return []
        listing = self.hold(version).corpus.listing(ranked["paper_id"].to_list())
        cards = listing.select(CARD)
        cards = cards.join(
            ranked.select("paper_id", *keep), on="paper_id", how="left", maintain_order="left"
        )
        return records(self.named(version, cards))

    @answered
    def overview(self, version: int | None) -> dict:
        """What the front page shows before a search: counts, facets and topics."""
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

    @answered
    def search(
        self,
        text: str,
        version: int | None = None,
        k: int = 10,
        mode: str = "hybrid",
        filters: dict[str, Any] | None = None,
        sort: str = "relevance",
        offset: int = 0,
    ) -> dict:
        """A page of the MAX_HITS best papers for `text` in a version (as ranked, newest
        first or by title), as cards with their scores.

        Args:
            filters: venue, year, topic (None or left out: any).
        """
        text = text.strip()
        if not text:
            raise ExplorerError(400, "give some words to search for")
        if mode not in MODES:
            raise ExplorerError(400, f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        offset, k = checked_page(sort, SEARCH_SORTS, offset, k)
        filters = {key: (filters or {}).get(key) for key in ("venue", "year", "topic")}
        started = time.perf_counter()
        found = self.ranked(text, self.resolved(version), mode, filters)
        page = sorted_hits(found, sort).slice(offset, k)
        weak = no_good_match(found) if found.height else "nothing matches the filters"
        return {
            "query": text, "version": self.resolved(version), "mode": mode,
            "filters": filters, "sort": sort, "offset": offset, "k": k, "total": found.height,
            "hits": records(self.named(version, page)),
            "no_good_match": weak is not None, "why": weak,
            "took_ms": round(1000 * (time.perf_counter() - started), 1),
        }  # fmt: skip

    def ranked(self, text: str, version: int, mode: str, filters: dict) -> pl.DataFrame:
        """The MAX_HITS best papers for a search, ranked once: its next pages and other
        orders read them again."""
        asked = (text, version, mode, *filters.values())
        if asked not in self.searches:
            corpus = self.hold(version).corpus
            self.searches[asked] = corpus.search(text, k=MAX_HITS, mode=mode, **filters)
            if len(self.searches) > SEARCHES:
                self.searches.pop(next(iter(self.searches)))
        return self.searches[asked]

    @answered
    def paper(self, paper_id: str, version: int | None = None) -> dict:
        """Everything the paper page shows: fields, links, topic, nearest papers,
        near-duplicates and the raw records it came from."""
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
            self.hold(version).corpus.listing([paper_id]).select("link", "code").rows(named=True)
        )
        paper["links"] = paper_links(paper | card)
        [paper["author_keys"]] = self.named(version, pl.DataFrame({"paper_id": [paper_id]}))[
            "author_keys"
        ].to_list()
        paper["version"] = self.resolved(version)
        return paper

    def no_paper(self, paper_id: str, version: int | None) -> ExplorerError:
        version = self.resolved(version)
        message = f"no paper {paper_id} in version {version}"
        return ExplorerError(404, message, paper_id=paper_id, version=version)

    @answered
    def similar(self, paper_id: str, version: int | None = None, k: int = 10) -> dict:
        """The k papers closest to a paper by its embedding, searched now."""
        k = max(1, min(k, MAX_HITS))
        con = self.lake(version)
        try:
            found = similar_papers(con, paper_id, k)
        except ValueError:
            raise self.no_paper(paper_id, version) from None
        hits = records(self.named(version, found))
        return {"paper_id": paper_id, "version": self.resolved(version), "hits": hits}

    @answered
    def topic(self, topic_id: int, version: int | None = None) -> dict:
        """A topic's label, size and terms (its papers: `papers` with the topic)."""
        con = self.lake(version)
        row = con.execute(
            "select label, papers, top_terms from topics where topic_id = ?", [topic_id]
        ).fetchone()
        if row is None:
            message = f"no topic {topic_id} in version {self.resolved(version)}"
            raise ExplorerError(404, message, topic_id=topic_id)
        fields = dict(zip(("label", "papers", "terms"), row, strict=True))
        return {"topic_id": topic_id, **fields, "version": self.resolved(version)}

    @answered
    def papers(
        self,
        version: int | None = None,
        filters: dict[str, Any] | None = None,
        sort: str | None = None,
        offset: int = 0,
        k: int = 20,
    ) -> dict:
        """A page of the papers passing `filters` (venue, year, topic, author_key as
        `author`), in the order `sort` (flows/serve/explorer_lists.py's `browse`)."""
        return browse(self, version, filters or {}, sort, offset, k)

    @answered
    def author(self, author_key: str, version: int | None = None) -> dict:
        """An author's name, spellings, papers, venues, years and co-authors."""
        return author_page(self, version, author_key)

    @answered
    def venue(self, venue: str, version: int | None = None) -> dict:
        """A venue's papers, per year (venue_stats) and per topic."""
        return venue_page(self, version, venue)

    @answered
    def map(self, version: int | None = None) -> bytes:
        """Every paper's place, topic, venue and year, and their colours (explorer_map.py)."""
        return self.maps.answer(self.lake(version), self.resolved(version))

    @answered
    def mapped(self, index: int, version: int | None = None) -> dict:
        """The paper at `index` in the map's order, named as the map names it."""
        return self.maps.paper(self.lake(version), self.resolved(version), index)

    @answered
    def map_indexes(self, paper_ids: list[str], version: int | None = None) -> dict:
        """Where papers lie in the map's order, by their ids."""
        return self.maps.indexes(self.lake(version), self.resolved(version), paper_ids)
