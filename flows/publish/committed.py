"""The staging connection of a run's commit, kept in this process: its memory holds the
tables of the latest version, which the next run's plan compares with while the catalog
is unchanged."""

from __future__ import annotations

from pathlib import Path

import duckdb

from flows.core.lake import STAGE
from flows.core.settings import Settings
from flows.publish.previous import catalog_stamp
from flows.publish.stage import TABLE_KEYS

# The staging connection of this process's last commit, by catalog file, with the catalog's
# stamp once it was kept: its memory holds the keyed tables of that version, and the next
# run's plan compares with them while the catalog is unchanged (`keep_committed`).
_COMMITTED: dict[Path, tuple[tuple, duckdb.DuckDBPyConnection]] = {}


def keep_committed(settings: Settings, con: duckdb.DuckDBPyConnection) -> bool:
    """Keep `con`, a run's staging connection after its commit (no catalog attached), for
    the next run's plan (`take_committed`): each keyed table staged in its memory becomes
    <name>__published, the rest is dropped. Whether it was kept: not for a PostgreSQL
    catalog, which other machines commit to."""
    stamp = catalog_stamp(settings)
    if stamp is None:
        return False
    staged = con.execute("select table_name from duckdb_tables() where database_name = 'memory'")
    names = [name for (name,) in staged.fetchall()]
    drops = [f"drop table {STAGE}.{name}" for name in names if name not in TABLE_KEYS]
    renames = [
        f"alter table {STAGE}.{name} rename to {name}__published"
        for name in names
        if name in TABLE_KEYS
    ]
    if drops or renames:  # drops first: the last run's __published too
        con.execute(";\n".join(drops + renames))
    key = settings.catalog_path.resolve()
    if key in _COMMITTED:
        _COMMITTED.pop(key)[1].close()
    _COMMITTED[key] = (stamp, con)
    return True


def take_committed(settings: Settings) -> duckdb.DuckDBPyConnection | None:
    """The connection `keep_committed` kept for this catalog, while the catalog is as it
    was then; else None (a stale one is closed)."""
    kept = _COMMITTED.pop(settings.catalog_path.resolve(), None)
    if kept is None:
        return None
    if kept[0] == catalog_stamp(settings):
        return kept[1]
    kept[1].close()
    return None
