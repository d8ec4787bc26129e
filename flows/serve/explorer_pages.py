"""The explorer's pages beyond search: lists of papers without a query, the heads of its
author and venue pages, a paper's links: what Explorer (flows/serve/explorer.py) answers
for /api/papers, /api/author/<key>, /api/venue/<name> and part of /api/paper/<id>.

A list passes the filters given (venue, year, topic, author), in the order asked (newest
first, by title, or closest to the topic's centre first) and comes a page at a time.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import polars as pl

from flows.core.lake import read_sql

if TYPE_CHECKING:
    from flows.serve.explorer import Explorer

SORTS = ("year", "title", "centre")  # a list's orders; a search's are SEARCH_SORTS
SEARCH_SORTS = ("relevance", "year", "title")
MAX_PAGE = 100  # papers a page holds at most
CO_AUTHORS = 12  # co-authors an author page names at most


def records(frame: pl.DataFrame) -> list[dict]:
    """Rows as JSON-ready dicts (NaN and infinities as null)."""
    rows = frame.to_dicts()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, float) and not math.isfinite(value):
                row[key] = None
    return rows


class BadRequest(ValueError):
    """A request whose parameters the explorer cannot answer (said as a 400)."""


def checked_page(sort: str, sorts: tuple[str, ...], offset: int, k: int) -> tuple[int, int]:
    """The page's offset and size, once `sort` is known to be one of `sorts`.

    Raises:
        BadRequest: an unknown order or a negative offset.
    """
    if sort not in sorts:
        raise BadRequest(f"sort must be one of {', '.join(sorts)}, not {sort!r}")
    if offset < 0:
        raise BadRequest(f"offset must be 0 or more, not {offset}")
    return offset, max(1, min(k, MAX_PAGE))


def browse(
    explorer: Explorer,
    version: int | None,
    filters: dict[str, Any],
    sort: str | None = None,
    offset: int = 0,
    k: int = 20,
) -> dict:
    """A page of the papers passing `filters` (venue, year, topic, author: None for any) in
    the order `sort` (default: closest to the centre for a topic, else newest first), with
    how many pass and how many of them each year holds (of the years on the page)."""
    sort = sort or ("centre" if filters.get("topic") is not None else "year")
    offset, k = checked_page(sort, SORTS, offset, k)
    params = {key: filters.get(key) for key in ("venue", "year", "topic", "author")}
    con = explorer.lake(version)
    page = con.execute(
        read_sql("explore/browse"), params | {"sort": sort, "offset": offset, "limit": k}
    ).pl()
    total = int(page["total"][0]) if page.height else count_passing(explorer, version, params)
    hits = explorer.listed(version, page, keep=("score",) if sort == "centre" else ())
    years = page.select("year", "year_papers").unique(maintain_order=True).drop_nulls("year")
    return {
        "version": explorer.resolved(version), "filters": params, "sort": sort,
        "offset": offset, "k": k, "total": total, "hits": hits,
        "year_papers": {str(y): n for y, n in years.iter_rows()},
    }  # fmt: skip


def count_passing(explorer: Explorer, version: int | None, params: dict[str, Any]) -> int:
    """How many papers pass the filters, for a page past the last (which holds none)."""
    con = explorer.lake(version)
    first = con.execute(
        read_sql("explore/browse"), params | {"sort": "year", "offset": 0, "limit": 1}
    ).fetchone()
    return 0 if first is None else int(first[-1])


def sorted_hits(found: pl.DataFrame, sort: str) -> pl.DataFrame:
    """A search's hits in the order asked: as ranked, newest first, or by title (titled
    papers first); ties keep their rank."""
    if sort == "year":
        return found.sort("year", "rank", descending=[True, False], nulls_last=True)
    if sort == "title":
        return found.sort(
            pl.col("untitled"), pl.col("title").str.to_lowercase(), pl.col("rank"), nulls_last=True
        )
    return found


def author_page(explorer: Explorer, version: int | None, key: str) -> dict:
    """The head of an author's page: the name, its spellings, papers, venues and years,
    and the co-authors of most papers with it (co-authored papers, then name)."""
    con = explorer.lake(version)
    rows = con.execute(read_sql("explore/author"), {"author_key": key}).pl()
    if rows.height == 0:
        raise LookupError(f"no author {key!r} in version {explorer.resolved(version)}")
    author = rows.to_dicts()[0]
    shared = (
        explorer.hold(version)
        .names.filter(pl.col("paper_id").is_in(author.pop("paper_ids")))
        .select(pl.col("author_keys").list.unique().alias("author_key"))
        .explode("author_key")
        .filter((pl.col("author_key") != key) & (pl.col("author_key") != ""))
        .group_by("author_key")
        .len("papers")
    )
    names = con.execute(
        read_sql("explore/author_names"), {"keys": shared["author_key"].to_list()}
    ).pl()
    co_authors = (
        shared.join(names, on="author_key")
        .sort(["papers", "name"], descending=[True, False])
        .head(CO_AUTHORS)
        .select("author_key", "name", "papers")
    )
    return author | {"version": explorer.resolved(version), "co_authors": co_authors.to_dicts()}


def venue_page(explorer: Explorer, version: int | None, venue: str) -> dict:
    """The head of a venue's page: its papers, each year's count (venue_stats) and the
    topics its papers fall in."""
    con = explorer.lake(version)
    years = con.execute(read_sql("explore/venue"), {"venue": venue}).pl()
    if years.height == 0:
        raise LookupError(f"no venue {venue!r} in version {explorer.resolved(version)}")
    topics = con.execute(read_sql("explore/venue_topics"), {"venue": venue}).pl()
    return {
        "venue": venue, "version": explorer.resolved(version),
        "papers": int(years["papers"].sum()), "years": years.to_dicts(),
        "topics": topics.to_dicts(),
    }  # fmt: skip


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
