"""The explorer's map as its API answers it: every paper's place, topic, venue and year as
columns of numbers in one binary answer (`packed`), after a JSON head that says what the map
can colour by (topics, venues, years), each value with its colour and name. No paper is
named in the answer: the page refers to a paper by its index in the map's order (paper_id
order) and asks for its id and title (`MapOrder.paper`) when it shows or opens it, and for
the indexes of the papers it lists (`MapOrder.indexes`) when it marks them.

The colours come from flows/core/palette.py (the report's too), so the page keeps none of
its own. Topics are named as the report names them (two terms of their label), except that
two topics whose names would read alike are told apart by a term only one of them has.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import duckdb
import numpy as np
import polars as pl

from flows.core.lake import read_sql
from flows.core.palette import NO_TOPIC_COLOUR, category_colour, sequential_colours
from flows.read import short_label

COLOURED_VENUES = 12  # venues with the most papers take a colour each; the rest are grey
ALIGN = 8  # bytes: every column starts at a multiple of this, for the page's typed arrays
# The answer's column types, by the names of the page's typed arrays, as numpy writes them:
# little-endian, the byte order of the machines browsers run on.
TYPES = {"float32": "<f4", "int16": "<i2", "int32": "<i4"}


class MapOrder:
    """The maps of the versions asked for last (`kept` of them): each one's papers' ids in
    the map's order, so that an index on the map names a paper and a paper's id its index."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self.ids: dict[int, pl.Series] = {}

    def answer(self, con: duckdb.DuckDBPyConnection, version: int) -> bytes:
        """/api/map of the version `con` reads (`paper_map`), its papers' ids kept."""
        body, ids = paper_map(con, version)
        self.ids.pop(version, None)
        self.ids[version] = ids  # most recently asked last
        if len(self.ids) > self.kept:
            self.ids.pop(next(iter(self.ids)))
        return body

    def ids_of(self, con: duckdb.DuckDBPyConnection, version: int) -> pl.Series:
        if version not in self.ids:
            self.answer(con, version)
        return self.ids[version]

    def paper(self, con: duckdb.DuckDBPyConnection, version: int, index: int) -> dict[str, Any]:
        """The paper at `index` in the map's order: its index, id, title and whether it is
        untitled (`paper_name`).

        Raises:
            LookupError: the map has no paper at `index`.
        """
        ids = self.ids_of(con, version)
        if not 0 <= index < len(ids):
            raise LookupError(f"no paper at index {index} of the map of version {version}")
        return {"index": index} | paper_name(con, ids[index], version)

    def indexes(
        self, con: duckdb.DuckDBPyConnection, version: int, paper_ids: list[str]
    ) -> dict[str, Any]:
        """The index in the map's order of each of `paper_ids` on the map, by its id."""
        ids = self.ids_of(con, version)
        at = ids.search_sorted(pl.Series(paper_ids, dtype=pl.String), side="left").to_list()
        found = {
            paper_id: index
            for paper_id, index in zip(paper_ids, at, strict=True)
            if index < len(ids) and ids[index] == paper_id
        }
        return {"version": version, "indexes": found}


def paper_map(con: duckdb.DuckDBPyConnection, version: int) -> tuple[bytes, pl.Series]:
    """The map of the version `con` reads as /api/map sends it (`packed`), and its papers'
    ids in the map's order.

    Its head holds the version, its number of `papers`, the topics (largest first, with
    name, short name, colour and where their label goes), venues (most papers first) and
    years (oldest first), each with its papers and colour. Its columns hold each paper's
    x and y, and its topic, venue and year as an index into those lists (-1 for none), in
    the map's order (sql/explore/map_points.sql). A paper's title is not sent: the page
    asks for it (`MapOrder.paper`) when it shows it.
    """
    topics = con.execute(read_sql("explore/map_topics")).pl()
    venues = con.execute(read_sql("explore/map_venues")).pl()
    years = con.execute(read_sql("explore/map_years")).pl()
    lists = {"topics": topics["topic_id"], "venues": venues["value"], "years": years["value"]}
    points = con.execute(
        read_sql("explore/map_points"), {name: s.to_list() for name, s in lists.items()}
    ).pl()
    names = topic_names(topics)
    head = {
        "version": version,
        "papers": points.height,
        "topics": [
            row | names[row["topic_id"]] | {"colour": category_colour(row["topic_id"])}
            for row in topics.to_dicts()
        ],
        "venues": [v | {"colour": venue_colour(i)} for i, v in enumerate(venues.to_dicts())],
        "years": [
            y | {"colour": c}
            for y, c in zip(years.to_dicts(), sequential_colours(years.height), strict=True)
        ],
        "no_value_colour": NO_TOPIC_COLOUR,
    }
    columns = {name: ("float32", points[name].to_numpy()) for name in ("x", "y")} | {
        name: (index_type(len(lists[name + "s"])), points[name].to_numpy())
        for name in ("topic", "venue", "year")
    }
    return packed(head, columns), points["paper_id"]


def packed(head: dict[str, Any], columns: dict[str, tuple[str, np.ndarray]]) -> bytes:
    """`head` and `columns` (each a type of TYPES and its values) as one binary answer: the
    length of the head (4 bytes, little-endian), the head as JSON with `columns` (each
    column's name, type and offset from the end of the head), then the columns' values,
    each column starting at a multiple of ALIGN bytes from the answer's start."""
    layout, parts, offset = [], [], 0
    for name, (kind, values) in columns.items():
        data = np.ascontiguousarray(values, dtype=TYPES[kind]).tobytes()
        layout.append({"name": name, "type": kind, "offset": offset})
        parts.append(data + bytes(-len(data) % ALIGN))
        offset += len(parts[-1])
    text = json.dumps(
        head | {"columns": layout}, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    ).encode()
    text += b" " * (-(4 + len(text)) % ALIGN)
    return struct.pack("<I", len(text)) + text + b"".join(parts)


def index_type(entries: int) -> str:
    """The smallest type of TYPES that holds an index into `entries` entries, and -1."""
    return "int16" if entries < 2**15 else "int32"


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
