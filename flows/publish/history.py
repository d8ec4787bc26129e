"""Versions of a warehouse: what changed between two, and content checksums of one."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import duckdb
import polars as pl

from flows.core.lake import (
    WarehouseError,
    define_paper_title,
    open_lake,
    published_versions,
    read_sql,
)
from flows.core.settings import Settings
from flows.publish.stage import TABLE_KEYS

# Tables whose content a version publishes; runs and dq_results record each run itself
# (ids, times) and so are left out of checksums.
CONTENT_TABLES = tuple(TABLE_KEYS)


@dataclass
class VersionDiff:
    """Changes from version a to version b."""

    version_a: int
    version_b: int
    papers: pl.DataFrame  # change, old_id, new_id, title, untitled
    groups: pl.DataFrame  # dimension, group, papers_a, papers_b, delta
    new_duplicates: pl.DataFrame  # paper_a, title_a, paper_b, title_b, score, kind, ...
    metadata: pl.DataFrame  # paper_id, title, field, old, new: what a kept paper shows
    sources: pl.DataFrame  # change (gained | lost), paper_id, title, source_path, record_no

    def counts(self) -> dict[str, int]:
        col = self.papers["change"]
        counts = {c: int((col == c).sum()) for c in ("added", "removed", "changed")}
        return counts | {
            "metadata_changed": self.metadata["paper_id"].n_unique(),
            "sources_changed": self.sources["paper_id"].n_unique(),
        }


def _check_versions(con: duckdb.DuckDBPyConnection, *versions: int) -> None:
    published = published_versions(con)
    for version in versions:
        if version not in published:
            raise WarehouseError(
                f"version {version} is not a published version "
                f"(published: {', '.join(map(str, published))})"
            )


def diff_versions(settings: Settings, version_a: int, version_b: int) -> VersionDiff:
    """Papers added, removed and changed, counts per venue and topic, new near-duplicates,
    the metadata kept papers show differently, and the records they gained or lost."""
    with open_lake(settings, extensions=()) as con:
        _check_versions(con, version_a, version_b)
        define_paper_title(con)
        con.execute(f"set variable version_a = {int(version_a)}")
        con.execute(f"set variable version_b = {int(version_b)}")
        return VersionDiff(
            version_a,
            version_b,
            papers=con.execute(read_sql("catalog/paper_changes")).pl(),
            groups=con.execute(read_sql("catalog/group_changes")).pl(),
            new_duplicates=con.execute(read_sql("catalog/new_duplicates")).pl(),
            metadata=con.execute(read_sql("catalog/metadata_changes")).pl(),
            sources=con.execute(read_sql("catalog/source_changes")).pl(),
        )


def checksums(settings: Settings, version: int | None = None) -> tuple[int, dict[str, str], str]:
    """Order-independent content checksums of a version, per table and for the whole.

    Returns:
        the version, table -> checksum, and the version's checksum over all tables.
    """
    with open_lake(settings, extensions=()) as con:
        version = version if version is not None else published_versions(con)[-1]
        _check_versions(con, version)
        con.execute(f"set variable version = {int(version)}")
        template = read_sql("catalog/table_checksum")
        tables: dict[str, str] = {}
        for table in CONTENT_TABLES:
            try:
                rows, total = con.execute(template.replace("{table}", table)).fetchone()
            except duckdb.CatalogException:
                continue  # the table did not exist at that version
            tables[table] = hashlib.sha256(f"{rows}:{total}".encode()).hexdigest()[:16]
    whole = hashlib.sha256(
        "".join(f"{name}={value};" for name, value in sorted(tables.items())).encode()
    ).hexdigest()[:16]
    return version, tables, whole
