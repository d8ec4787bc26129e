"""paperlake doctor: what of a warehouse can be read, and what can be rebuilt.

A check looks at the catalog (it opens; its data path is its own), at every data and
delete file a published version reads (there, of the size the catalog records, readable
to the last row, with the rows it records) and at every cache file (its seal). A repair
drops the damaged caches, salvages each table whose latest files are damaged (a catalog
commit keeps the rows its readable files hold, so every command can read it again), and
rebuilds the latest version from the raw files it was built from (a forced run, whose
rows replace what was salvaged). Earlier versions that read a lost file stay unreadable
for that table: the report names them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from flows.core import cache, damage
from flows.core.errors import WarehouseError
from flows.core.lake import LAKE, attach, connect, published_versions, read_sql
from flows.core.locks import run_lock
from flows.core.settings import Settings


@dataclass
class Finding:
    """One thing found wrong: what (catalog, data file, cache, leftover), where, why."""

    kind: str
    path: str
    problem: str
    table: str | None = None
    versions: tuple[int, ...] = ()  # the published versions that read the file


@dataclass
class Checkup:
    """What `check_warehouse` found: the findings, the latest version, and how much it looked at."""

    findings: list[Finding] = field(default_factory=list)
    latest: int | None = None
    data_files: int = 0
    cache_files: int = 0
    readable: bool = True  # the catalog opens

    def mendable(self) -> list[Finding]:
        """What a repair mends: damaged caches, leftovers, the latest version's files (a
        damaged catalog too, which only a backup mends)."""
        return [f for f in self.findings if f.kind != "data file" or self.latest in f.versions]

    def lost(self) -> list[Finding]:
        """Files only earlier versions read: nothing rebuilds them."""
        return [f for f in self.findings if f not in self.mendable()]

    def damaged_tables(self) -> dict[str, list[Finding]]:
        """The tables whose files the latest version reads are damaged, with those files."""
        found: dict[str, list[Finding]] = defaultdict(list)
        for f in self.findings:
            if f.kind == "data file" and self.latest in f.versions:
                found[f.table].append(f)
        return dict(found)


def check_warehouse(settings: Settings) -> Checkup:
    """Check the catalog, every data file a version reads and every cache file."""
    up = Checkup()
    con = connect(extensions=())
    try:
        attach(con, settings, read_only=True)
    except (WarehouseError, duckdb.Error) as exc:
        told = damage.told(exc) or exc
        up.findings.append(Finding("catalog", str(settings.catalog_path), str(told)))
        up.readable = False
        con.close()
        up.findings += cache_findings(settings, up)
        return up
    try:
        versions = published_versions(con)
        up.latest = versions[-1] if versions else None
        up.findings += data_file_findings(con, versions, up)
    finally:
        con.close()
    up.findings += cache_findings(settings, up)
    return up


def version_files(con: duckdb.DuckDBPyConnection, versions: list[int]) -> dict[tuple, set]:
    """Every data and delete file each published version reads, by (path, kind, table,
    bytes recorded), with the versions that read it."""
    files: dict[tuple, set] = defaultdict(set)
    for version in versions:
        tables = con.execute(read_sql("doctor/tables_at"), [version, version]).fetchall()
        for (table,) in tables:
            listed = con.execute(
                "select data_file, data_file_size_bytes, delete_file, delete_file_size_bytes "
                f"from ducklake_list_files('{LAKE}', ?, snapshot_version => ?)",
                [table, version],
            ).fetchall()
            for data, data_bytes, delete, delete_bytes in listed:
                files[(data, "data", table, data_bytes)].add(version)
                if delete:
                    files[(delete, "delete", table, delete_bytes)].add(version)
    return files


def recorded_rows(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """The rows the catalog records of each data file and delete file, by file name."""
    rows = con.execute(read_sql("doctor/recorded_rows")).fetchall()
    return {Path(path).name: count for path, count in rows}


def file_problem(con: duckdb.DuckDBPyConnection, path: str, size: int, rows: int | None):
    """Why a data or delete file cannot be read as the catalog records it; None if it can."""
    local = Path(path) if "://" not in path else None
    if local is not None:
        if not local.is_file():
            return "missing"
        if size is not None and local.stat().st_size != size:
            return f"{local.stat().st_size} bytes where the catalog records {size}"
    try:
        found = con.execute("select num_rows from parquet_file_metadata(?)", [path]).fetchone()
        con.execute("select sum(hash(t)) from read_parquet(?) t", [path]).fetchone()
    except duckdb.Error as exc:
        return f"unreadable: {damage.reason_of(exc)}"
    if rows is not None and found[0] != rows:
        return f"{found[0]} rows where the catalog records {rows}"
    return None


def data_file_findings(
    con: duckdb.DuckDBPyConnection, versions: list[int], up: Checkup
) -> list[Finding]:
    files = version_files(con, versions)
    rows = recorded_rows(con)
    up.data_files = len(files)
    findings = []
    for (path, kind, table, size), readers in sorted(files.items()):
        if problem := file_problem(con, path, size, rows.get(Path(path).name)):
            # A delete file lost loses its data file's rows too: which of them are deleted
            # is unknown.
            said = problem if kind == "data" else f"delete file {problem}"
            findings.append(Finding("data file", path, said, table, tuple(sorted(readers))))
    return findings


def cache_findings(settings: Settings, up: Checkup) -> list[Finding]:
    """Every cache file that fails its seal (or record digest), every search index that
    does not open, and what a killed writer left (temporary files)."""
    root = settings.cache_path
    if not root.is_dir():
        return []
    findings = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.endswith(cache.SEAL):
            continue
        up.cache_files += 1
        if ".tmp" in path.name:
            findings.append(Finding("leftover", str(path), "a temporary file a killed run left"))
        elif problem := cache_problem(path):
            findings.append(Finding("cache", str(path), problem))
    return findings


def cache_problem(path: Path) -> str | None:
    """Why one cache file cannot be trusted; None where it can (or is no cache file)."""
    try:
        if path.suffix == ".parquet":
            cache.verify(path)
        elif path.suffix == ".json":
            cache.read_record(path)
        elif path.suffix == ".duckdb":
            with duckdb.connect(str(path), read_only=True) as index:
                index.execute("select count(*) from docs").fetchone()
    except cache.Damaged as exc:
        return exc.reason
    except duckdb.Error as exc:
        return f"unreadable: {damage.reason_of(exc)}"
    return None


def repair_caches(up: Checkup) -> list[str]:
    """Drop every damaged cache file (a parse with its entry) and every leftover."""
    dropped = []
    for f in up.findings:
        if f.kind not in ("cache", "leftover"):
            continue
        path = Path(f.path)
        entry = [path]
        if path.parent.parent.name == "parsed" or path.parent.name == "parsed":
            key = path.parent if path.parent.name != "parsed" else path.with_suffix("")
            entry = [key, key.with_suffix(".json")]
        for each in entry:
            cache.drop(each)
        dropped.append(f.path)
    return dropped


def salvage_tables(settings: Settings, up: Checkup) -> dict[str, tuple[int, int]]:
    """Replace each table whose latest files are damaged by the rows its readable files
    hold (a data file whose delete file is lost counts as lost), in one catalog commit
    without a message (not a version), under the run lock. Returns table: (rows kept,
    rows the catalog recorded in the files lost)."""
    damaged = up.damaged_tables()
    if not damaged:
        return {}
    done = {}
    with run_lock(settings):
        con = connect(extensions=())
        try:
            attach(con, settings)
            con.execute("begin transaction")
            for table, findings in sorted(damaged.items()):
                if (counts := salvage_table(con, table, {f.path for f in findings})) is not None:
                    done[table] = counts
            con.execute("commit")
        finally:
            con.close()
    return done


def salvage_table(
    con: duckdb.DuckDBPyConnection, table: str, lost: set[str]
) -> tuple[int, int] | None:
    """Replace `table` (latest snapshot) by the rows of its files not in `lost`: the rows
    kept and the rows dropped; None where the latest snapshot reads none of `lost` (a
    repair salvaged it already)."""
    listed = con.execute(
        f"select data_file, delete_file from ducklake_list_files('{LAKE}', ?)", [table]
    ).fetchall()
    kept = [(d, x) for d, x in listed if d not in lost and x not in lost]
    if len(kept) == len(listed):
        return None
    rows = recorded_rows(con)
    gone = sum(
        rows.get(Path(d).name, 0) - (rows.get(Path(x).name, 0) if x else 0)
        for d, x in listed
        if (d, x) not in kept
    )
    columns = ", ".join(f'"{c}"' for (c, *_) in con.execute(f"describe {table}").fetchall())
    target = f"{LAKE}.main.{table}"
    if not kept:
        con.execute(f"create or replace table {target} as select {columns} from {target} limit 0")
        return 0, gone
    deletes = [x for _, x in kept if x]
    sql = read_sql("doctor/salvaged_rows" if deletes else "doctor/salvaged_rows_no_deletes")
    sql = sql.replace("{columns}", columns).replace("{files}", sql_list(d for d, _ in kept))
    con.execute(
        f"create or replace table {target} as {sql.replace('{deletes}', sql_list(deletes))}"
    )
    return con.execute(f"select count(*) from {target}").fetchone()[0], gone


def sql_list(paths) -> str:
    """Paths as a DuckDB list of string literals."""
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


def latest_config(settings: Settings) -> dict:
    """The settings the latest version was built with, from its commit's manifest."""
    con = connect(extensions=())
    try:
        attach(con, settings, read_only=True)
        version = published_versions(con)[-1]
        extra = con.execute(
            f"select commit_extra_info from {LAKE}.snapshots() where snapshot_id = ?", [version]
        ).fetchone()[0]
    finally:
        con.close()
    return json.loads(extra)["config"]
