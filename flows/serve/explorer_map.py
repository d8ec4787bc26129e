"""The explorer's map as its API answers it: every paper's place column by column, and what
the map can colour by (topics, venues, years), each value with its colour and name.

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
    """The map of the version `con` reads: points (paper_id, x, y, topic_id, venue as an
    index into `venues`, year, title), topics (largest first, with name, short name,
    colour and where their label goes), venues (most papers first) and years (oldest
    first), each with its papers and colour."""
    points = con.execute(read_sql("explore/map_points")).pl()
    topics = con.execute(read_sql("explore/map_topics")).pl()
    venues = (
        points.drop_nulls("venue")
        .group_by("venue")
        .len("papers")
        .sort(["papers", "venue"], descending=[True, False])
    )
    years = points.drop_nulls("year").group_by("year").len("papers").sort("year")
    code = {venue: i for i, venue in enumerate(venues["venue"])}
    names = topic_names(topics)
    return {
        "points": {
            "paper_id": points["paper_id"].to_list(),
            "x": points["x"].to_list(),
            "y": points["y"].to_list(),
            "topic_id": points["topic_id"].to_list(),
            "venue": [code.get(v) for v in points["venue"].to_list()],
            "year": points["year"].to_list(),
            "title": points["title"].to_list(),
        },
        "topics": [
            row | names[row["topic_id"]] | {"colour": category_colour(row["topic_id"])}
            for row in topics.to_dicts()
        ],
        "venues": [
            {"value": v, "papers": n, "colour": venue_colour(i)}
            for i, (v, n) in enumerate(venues.iter_rows())
        ],
        "years": [
            {"value": y, "papers": n, "colour": c}
            for (y, n), c in zip(years.iter_rows(), sequential_colours(years.height), strict=True)
        ],
        "no_value_colour": NO_TOPIC_COLOUR,
    }


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
