"""The explorer's map as its API answers it: every paper's place column by column, and what
the map can colour by (topics, venues, years), each value with its colour and name. The
columns are built by one query (sql/explore/map_points.sql) and hold small numbers: a
paper's title, the longest thing it has, is asked for one paper at a time (`paper_name`).

The colours come from flows/core/palette.py (the report's too), so the page keeps none of
its own. Topics are named as the report names them (two terms of their label), except that
two topics whose names would read alike are told apart by a term only one of them has.
"""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

from flows.core.lake import read_sql
from flows.core.palette import NO_TOPIC_COLOUR, category_colour, sequential_colours
from flows.read import short_label

COLOURED_VENUES = 12  # venues with the most papers take a colour each; the rest are grey


def paper_map(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The map of the version `con` reads: its papers column by column (paper_id, x, y,
    topic_id, venue as an index into `venues`, year; in paper_id order, read in one query),
    topics (largest first, with name, short name, colour and where their label goes),
    venues (most papers first) and years (oldest first), each with its papers and colour.
    A paper's title is not sent: the page asks for it (`paper_name`) when it shows it."""
    row = con.execute(read_sql("explore/map_points")).fetchone()
    columns = dict(zip([c[0] for c in con.description], row, strict=True))
    topics = con.execute(read_sql("explore/map_topics")).pl()
    venues, years = columns.pop("venues") or [], columns.pop("years") or []
    names = topic_names(topics)
    papers = columns.pop("papers")
    return {
        "papers": papers,
        "points": {name: values or [] for name, values in columns.items()},
        "topics": [
            row | names[row["topic_id"]] | {"colour": category_colour(row["topic_id"])}
            for row in topics.to_dicts()
        ],
        "venues": [v | {"colour": venue_colour(i)} for i, v in enumerate(venues)],
        "years": [
            y | {"colour": c} for y, c in zip(years, sequential_colours(len(years)), strict=True)
        ],
        "no_value_colour": NO_TOPIC_COLOUR,
    }


def paper_name(con: duckdb.DuckDBPyConnection, paper_id: str, version: int) -> dict[str, Any]:
    """How the map names a paper where one points at it (sql/explore/names.sql): its title
    (else its abstract's first words) and whether it is untitled.

    Raises:
        LookupError: no such paper in the version `con` reads.
    """
    rows = con.execute(read_sql("explore/names"), {"ids": [paper_id]}).pl()
    if rows.height == 0:
        raise LookupError(f"no paper {paper_id} in version {version}")
    return rows.select("paper_id", "title", "untitled").to_dicts()[0]


def venue_colour(rank: int) -> str:
    """The colour of the venue with the rank-th most papers: grey past COLOURED_VENUES."""
    return category_colour(rank) if rank < COLOURED_VENUES else NO_TOPIC_COLOUR


def topic_names(topics: pl.DataFrame) -> dict[int, dict[str, str | None]]:
    """Each topic's `name` on the map and legend, and `short`, a one-term name for the map
    where the name does not fit (None where one term would not tell it from another).

    Args:
        topics: topic_id, label and top_terms (its terms, most telling first), largest first.
    """
    rows = topics.select("topic_id", "label", "top_terms").rows()
    terms = {t: split_terms(label) + list(top or []) for t, label, top in rows}
    names = {t: short_label(label, t) for t, label, _ in rows}
    for name in {n for n in names.values() if list(names.values()).count(n) > 1}:
        alike = [t for t in names if names[t] == name]
        for topic in alike:
            others = {term for t in alike if t != topic for term in terms[t]}
            own = next((term for term in terms[topic] if term not in others), None)
            first = name.split(", ")[0]
            names[topic] = f"{first}, {own}" if own else f"{name} ({topic})"
    firsts = [name.split(", ")[0] for name in names.values()]
    return {
        t: {"name": name, "short": first if firsts.count(first) == 1 and first != name else None}
        for (t, name), first in zip(names.items(), firsts, strict=True)
    }


def split_terms(label: str | None) -> list[str]:
    return [term.strip() for term in (label or "").split(",") if term.strip()]
