"""Publish: copy the staged tables into the DuckLake catalog as one snapshot.

Write-audit-publish: the run stages every table in an in-memory DuckDB, the suites check
them, and only then does one transaction apply the changes to the catalog. Each table
changes by key (rows gone are deleted, rows new or changed are inserted), so unchanged
rows keep their data files and DuckLake's change feed shows what really changed.

Modules, in the order a run meets them:
    fingerprint   what a version is built from; whether the latest is up to date
    previous      the latest version's state a run carries over (`Previous`)
    stage         the staging database: frames into memory.main, the catalog beside it
    plan          each table's change, by key and row hash (`prepare`)
    published     the row hashes and digests the last commit kept for the next plan
    snapshot      the plans applied as one snapshot (`commit`)
    committed     a commit's staging connection, kept for the next run's plan
    compaction    small files merged, every version kept readable
    history       what changed between versions; content checksums of one
    doctor        what of a warehouse can be read, and what can be rebuilt
"""

from flows.core.lake import STAGE, stage_frames
from flows.publish.committed import keep_committed, take_committed
from flows.publish.compaction import Compaction, compact, compact_when_due
from flows.publish.doctor import (
    Checkup,
    Finding,
    check_warehouse,
    latest_config,
    repair_caches,
    salvage_tables,
)
from flows.publish.fingerprint import current_fingerprint, refuse_model_switch, up_to_date
from flows.publish.history import (
    CONTENT_TABLES,
    VersionDiff,
    checksums,
    diff_versions,
)
from flows.publish.plan import HASHED_PLAN_ROWS, plan_changes, prepare, row_hashes
from flows.publish.previous import (
    Previous,
    catalog_stamp,
    previous_version,
    remember_published,
)
from flows.publish.published import PublishedDigests, PublishedRows, table_digest
from flows.publish.snapshot import FAULT_POINTS, commit, publish, publish_tables
from flows.publish.stage import (
    HISTORY_TABLES,
    TABLE_KEYS,
    detach,
    next_version,
    table_columns,
)

__all__ = [
    "CONTENT_TABLES",
    "FAULT_POINTS",
    "HASHED_PLAN_ROWS",
    "HISTORY_TABLES",
    "STAGE",
    "TABLE_KEYS",
    "Checkup",
    "Compaction",
    "Finding",
    "Previous",
    "PublishedDigests",
    "PublishedRows",
    "VersionDiff",
    "catalog_stamp",
    "check_warehouse",
    "checksums",
    "commit",
    "compact",
    "compact_when_due",
    "current_fingerprint",
    "detach",
    "diff_versions",
    "keep_committed",
    "latest_config",
    "next_version",
    "plan_changes",
    "prepare",
    "previous_version",
    "publish",
    "publish_tables",
    "refuse_model_switch",
    "remember_published",
    "repair_caches",
    "row_hashes",
    "salvage_tables",
    "stage_frames",
    "table_columns",
    "table_digest",
    "take_committed",
    "up_to_date",
]
