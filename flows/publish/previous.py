"""The latest version's state a run carries over (`Previous`), read from the catalog once
and kept in this process while the catalog is as its last commit left it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from flows.core import data_path
from flows.core.lake import attach, catalog_exists, catalog_name, connect
from flows.core.settings import Settings
from flows.publish.stage import lake_tables, table_exists

SHOWN_SCHEMA = {"paper_id": pl.String, "source_path": pl.String, "record_no": pl.Int64}


@dataclass
class Previous:
    """What a run carries over from the latest version: its number, fingerprint and model
    (the `model` setting it ran with), its topics (id -> centroid), the papers they held
    and each one's topic, each paper's place on the map, and the record each paper was
    shown from.

    Per-paper state is held in frames, not Python collections: Prefect walks a task's
    parameters item by item, slowly for sets and dicts of many papers.
    """

    version: int | None = None
    fingerprint: str | None = None
    model: str | None = None
    centroids: dict[int, np.ndarray] = field(default_factory=dict)
    assignments: pl.DataFrame = field(  # each paper's topic (paper_id, topic_id)
        default_factory=lambda: pl.DataFrame(schema={"paper_id": pl.String, "topic_id": pl.Int32})
    )
    coordinates: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(
            schema={"paper_id": pl.String, "x": pl.Float64, "y": pl.Float64}
        )
    )
    shown: pl.DataFrame = field(  # each paper's record its metadata came from
        default_factory=lambda: pl.DataFrame(schema=SHOWN_SCHEMA)
    )

    @property
    def papers(self) -> pl.Series:
        """The papers the version's topics held."""
        return self.assignments["paper_id"]


# What this process last published, by catalog file: the catalog's stamp (`catalog_stamp`)
# right after, and the version's state. A process that serves many runs (`paperlake serve`)
# takes the state from here while the catalog is as its own commit left it.
_PUBLISHED: dict[Path, tuple[tuple, Previous]] = {}


def catalog_stamp(settings: Settings) -> tuple | None:
    """Identity, size and modification time of a DuckDB-file catalog and its write-ahead
    log: any commit, by any process, changes them. None for a PostgreSQL catalog."""
    if settings.catalog:
        return None
    files = (settings.catalog_path, Path(f"{settings.catalog_path}.wal"))
    return tuple(
        (s.st_ino, s.st_size, s.st_mtime_ns) if (s := stat_or_none(f)) else None for f in files
    )


def stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def remember_published(
    settings: Settings, tables: dict[str, pl.DataFrame], version: int, fingerprint: str
) -> None:
    """Keep what version `version` holds, from the tables just published, for the next run
    of this process (`previous_version`)."""
    stamp = catalog_stamp(settings)
    if stamp is None:
        return
    topics = tables["topics"].filter(pl.col("centroid").is_not_null())
    state = Previous(
        version=version,
        fingerprint=fingerprint,
        model=config_model(tables["runs"]["config"][0]),
        centroids={
            t: np.asarray(c, dtype=np.float32)
            for t, c in zip(topics["topic_id"].to_list(), topics["centroid"].to_list(), strict=True)
        },
        assignments=tables["paper_topics"].select("paper_id", "topic_id"),
        coordinates=tables["paper_coordinates"].select("paper_id", "x", "y"),
        shown=tables["papers"].select(*SHOWN_SCHEMA),
    )
    _PUBLISHED[settings.catalog_path.resolve()] = (stamp, state)


def previous_version(settings: Settings) -> Previous:
    """The latest version's state a run needs: as this process published or last read it,
    while the catalog is unchanged since; else read in one attach of the catalog."""
    if not catalog_exists(settings):
        # A run that would make the catalog stops here, not after its stages.
        data_path.refuse_foreign_files(settings, catalog_name(settings))
        return Previous()
    key, stamp = settings.catalog_path.resolve(), catalog_stamp(settings)
    kept = _PUBLISHED.get(key)
    if kept and kept[0] == stamp:
        return kept[1]
    found = read_previous(settings)
    if stamp is not None:  # taken before the read: a commit since makes it differ
        _PUBLISHED[key] = (stamp, found)
    return found


def read_previous(settings: Settings) -> Previous:
    """The latest version's state a run needs, read in one attach of the catalog."""
    con = connect(extensions=())
    try:
        attach(con, settings, read_only=True)
        names = lake_tables(con)
        found = Previous()
        if "runs" in names:
            found.version, found.fingerprint, found.model = last_run(con) or (None, None, None)
        described = con.execute("describe topics").fetchall() if "topics" in names else []
        if "centroid" in {r[0] for r in described}:
            rows = con.execute("select topic_id, centroid from topics where centroid is not null")
            found.centroids = {t: np.asarray(c, dtype=np.float32) for t, c in rows.fetchall()}
            found.assignments = con.execute("select paper_id, topic_id from paper_topics").pl()
        if "paper_coordinates" in names:
            found.coordinates = con.execute("select paper_id, x, y from paper_coordinates").pl()
        if "papers" in names:
            shown = con.execute("select paper_id, source_path, record_no from papers").pl()
            found.shown = shown.cast(SHOWN_SCHEMA)
        return found
    finally:
        con.close()


def config_model(config: str | None) -> str | None:
    """The `model` setting in a runs row's config (JSON)."""
    return json.loads(config).get("model") if config else None


def last_run(con: duckdb.DuckDBPyConnection) -> tuple[int, str, str | None] | None:
    """The latest version, and the fingerprint and model of the run that published it."""
    row = con.execute(
        "select snapshot_id, fingerprint, config from runs order by snapshot_id desc limit 1"
    ).fetchone()
    return row and (row[0], row[1], config_model(row[2]))


def latest_published(settings: Settings) -> tuple[int, str, str | None] | None:
    """The latest version, and the fingerprint and model of the run that published it."""
    if not catalog_exists(settings):
        data_path.refuse_foreign_files(settings, catalog_name(settings))
        return None
    con = connect(extensions=())
    try:
        attach(con, settings, read_only=True)
        return last_run(con) if table_exists(con, "runs") else None
    finally:
        con.close()
