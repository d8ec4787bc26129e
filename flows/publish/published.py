"""What the last commit kept for the next run's plan: the row hashes (large tables) and the
digests of the keyed tables as the latest version holds them, stamped with the snapshot
that wrote them, sealed and checked when read (flows/core/cache.py)."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import duckdb
import polars as pl

from flows.core import cache
from flows.core.held import HELD_BACK
from flows.core.lake import LAKE
from flows.core.settings import Settings
from flows.publish.stage import TABLE_KEYS


class PublishedRows:
    """The row hashes (`row_hashes`) of every keyed table as the latest version holds
    them, kept in the cache by the run that committed it, so that the next run plans its
    publish without reading the catalog's tables (`plan_from_hashes`).

    One Parquet file per table and a stamp naming the catalog (the time of its first
    snapshot), its latest snapshot (id and time), the Polars version (whose hashes these
    are) and the columns hashed as their values' hashes (flows/core/held.py: hashes made
    with an abstract's text are not compared with rows that hold its hash). The stamp
    is removed before the files change and written after them: a cache whose stamp does
    not name the catalog's latest snapshot, which any other commit makes, is not used.
    The catalog is named by what it holds, not by where it lies: a warehouse moved or
    copied whole (its cache with it) plans its next publish from the hashes as before,
    while another catalog, whose snapshots were made at other times, never matches.
    """

    def __init__(self, settings: Settings):
        self.folder = settings.cache_path / "published"

    @property
    def stamp_path(self) -> Path:
        return self.folder / "stamp.json"

    def stamp(self, con: duckdb.DuckDBPyConnection) -> dict:
        """The stamp of the catalog attached on `con` as it is now."""
        first, snapshot, at = con.execute(
            "select min_by(snapshot_time, snapshot_id)::varchar, max(snapshot_id), "
            f"max_by(snapshot_time, snapshot_id)::varchar from {LAKE}.snapshots()"
        ).fetchone()
        return {"catalog_started": first, "snapshot": snapshot, "time": at,
                "polars": pl.__version__, "held_back": HELD_BACK}  # fmt: skip

    def load(self, con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame] | None:
        """The hashes of every keyed table, if they are those of the latest snapshot (and
        pass their seals: else they are dropped, and the plan reads the catalog)."""
        try:
            if cache.read_record(self.stamp_path) != self.stamp(con):
                return None
            return {
                name: cache.read_parquet(self.folder / f"{name}.parquet") for name in TABLE_KEYS
            }
        except FileNotFoundError:
            return None
        except cache.Damaged as damage:
            cache.dropped(damage, "the publish is planned against the catalog", self.stamp_path)
            return None

    def save(self, con: duckdb.DuckDBPyConnection, hashes: dict[str, pl.DataFrame]) -> None:
        """Keep `hashes` (`row_hashes` of each keyed table), just committed on `con` under
        the run lock. The version is published already: a cache that cannot be written
        (a full disk) is left without its stamp, and the next plan reads the catalog."""
        try:
            self.stamp_path.unlink(missing_ok=True)
            for name in TABLE_KEYS:
                cache.write_parquet(self.folder / f"{name}.parquet", hashes[name])
            cache.write_record(self.stamp_path, self.stamp(con))
        except OSError as exc:
            logging.getLogger("paperlake").warning("row hashes not kept: %s", exc)

    def restamp(self, con: duckdb.DuckDBPyConnection, before: dict) -> None:
        """Stamp the kept hashes with the catalog's snapshot now, where they were those of
        the snapshot `before` and no commit since changed a row (`compact`)."""
        restamp(self.stamp_path, before, self.stamp(con))


def table_digest(frame: pl.DataFrame) -> str:
    """A digest of a table: its columns and types, its row count and the sums of its rows'
    64-bit hashes (their low and high halves), so that the order of the rows does not
    matter. Two tables of equal digest differ only by a chance collision of the sums."""
    hashes = frame.hash_rows()
    low, high = (hashes % 2**32).sum(), (hashes // 2**32).sum()
    columns = json.dumps([[name, str(dtype)] for name, dtype in frame.schema.items()])
    kind = hashlib.sha256(columns.encode()).hexdigest()[:16]
    return f"{kind}:{frame.height}:{low}:{high}"


class PublishedDigests:
    """The `table_digest` of every keyed table as the latest version holds it, kept in the
    cache by the run that committed it, with the stamp `PublishedRows` writes: read only
    while the catalog's latest snapshot is the one that stamp names."""

    def __init__(self, settings: Settings):
        self.rows = PublishedRows(settings)
        self.path = self.rows.folder / "digests.json"

    def load(self, con: duckdb.DuckDBPyConnection) -> dict[str, str]:
        """The digests, if they are those of the latest snapshot; else none."""
        try:
            kept = cache.read_record(self.path)
            return kept["digests"] if kept["stamp"] == self.rows.stamp(con) else {}
        except FileNotFoundError:
            return {}
        except (cache.Damaged, TypeError, KeyError) as exc:
            damage = exc if isinstance(exc, cache.Damaged) else cache.Damaged(self.path, repr(exc))
            cache.dropped(damage, "each table is compared with the catalog")
            return {}

    def save(self, con: duckdb.DuckDBPyConnection, digests: dict[str, str]) -> None:
        """Keep `digests`, of the tables just committed on `con` under the run lock."""
        try:
            cache.write_record(self.path, {"stamp": self.rows.stamp(con), "digests": digests})
        except OSError as exc:
            logging.getLogger("paperlake").warning("table digests not kept: %s", exc)

    def restamp(self, con: duckdb.DuckDBPyConnection, before: dict) -> None:
        """As `PublishedRows.restamp`, for the digests."""
        restamp(self.path, before, self.rows.stamp(con), field="stamp")


def restamp(path: Path, before: dict, now: dict, field: str | None = None) -> None:
    """Replace the stamp `before` in the JSON file `path` (the whole file, or its `field`)
    by `now`; a file that holds another stamp, or none, is left as it is."""
    try:
        kept = cache.read_record(path)
        if (kept[field] if field else kept) != before:
            return
        cache.write_record(path, {**kept, field: now} if field else now)
    except (OSError, cache.Damaged, TypeError, KeyError):
        return
