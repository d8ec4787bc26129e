"""Publish plans each table's change by key and row hash: what it deletes and inserts."""

from __future__ import annotations

import re
import shutil

import pytest

from flows.core import cache
from flows.core.lake import LAKE, attach, connect
from flows.core.settings import Settings
from flows.core.tables import keyed_tables
from flows.publish import STAGE, PublishedRows, plan_changes, row_hashes
from flows.publish import plan as planning
from flows.publish.plan import catalog_hashes, plan_from_hashes
from flows.publish.snapshot import apply_changes

TABLE_KEYS = keyed_tables()


@pytest.fixture
def con(tmp_path):
    """A staging connection with an empty lake attached."""
    con = connect(extensions=())
    attach(con, Settings(warehouse=tmp_path / "warehouse"), create=True)
    yield con
    con.execute("use memory")
    con.execute(f"detach {LAKE}")
    con.close()


def published_and_staged(con, name: str, columns: str, lake_rows: str, staged_rows: str):
    con.execute(f"create table {LAKE}.main.{name} ({columns})")
    con.execute(f"insert into {LAKE}.main.{name} values {lake_rows}")
    con.execute(f"create table {STAGE}.{name} ({columns})")
    con.execute(f"insert into {STAGE}.{name} values {staged_rows}")


@pytest.fixture(params=["catalog", "hashes", "catalog hashes"])
def planner(request, monkeypatch):
    """Every way a publish is planned: the staged table against the catalog's
    (`plan_changes`), and the table's row hashes against those kept of the catalog's rows
    (`plan_from_hashes`, here given the lake table's hashes), or against those made from
    the catalog's rows a batch at a time where none were kept (`catalog_hashes`, two rows
    a batch)."""
    if request.param == "catalog":
        return plan_changes
    monkeypatch.setattr(planning, "CATALOG_BATCH_ROWS", 2)

    def from_hashes(con, name: str, keys: tuple[str, ...]) -> str:
        frame = con.table(f"{STAGE}.{name}").pl()
        if request.param == "hashes":
            published = row_hashes(con.table(f"{LAKE}.main.{name}").pl(), keys)
        else:
            published = catalog_hashes(con, {name: frame}, {name: keys})[name]
        hashes = row_hashes(frame, keys)
        modes = plan_from_hashes(
            con, {name: frame}, {name: hashes}, {name: published}, {name: keys}
        )
        return modes[name]

    return from_hashes


def plan(con, name: str, keys: tuple[str, ...], planner=plan_changes) -> tuple[list, list]:
    """The keys the plan removes and the rows it adds, sorted."""
    assert planner(con, name, keys) == "merge"
    removed = con.execute(f"select * from {STAGE}.{name}__removed order by all").fetchall()
    added = con.execute(f"select * from {STAGE}.{name}__added order by all").fetchall()
    return removed, added


def publish_plan(con, name: str, keys: tuple[str, ...], planner=plan_changes) -> tuple[int, int]:
    mode = planner(con, name, keys)
    con.execute("begin transaction")
    changed = apply_changes(con, name, keys, mode)
    con.execute("commit")
    lake = con.execute(f"select * from {LAKE}.main.{name} order by all").fetchall()
    assert lake == con.execute(f"select * from {STAGE}.{name} order by all").fetchall()
    return changed


def test_a_changed_float_in_a_vector_deletes_and_inserts_only_that_row(con, planner):
    published_and_staged(
        con,
        "embeddings",
        "paper_id varchar, model varchar, dim integer, embedding float[]",
        "('p1', 'm', 2, [0.75, 0.5]), ('p2', 'm', 2, [1.0, 0.0]), ('p3', 'm', 2, [0.0, 1.0])",
        "('p1', 'm', 2, [0.75, 0.5]), ('p2', 'm', 2, [1.0, 0.5]), ('p4', 'm', 2, [0.5, 0.25])",
    )
    assert plan(con, "embeddings", ("paper_id", "model"), planner) == (
        [("p2", "m"), ("p3", "m")],
        [("p2", "m", 2, [1.0, 0.5]), ("p4", "m", 2, [0.5, 0.25])],
    )
    assert publish_plan(con, "embeddings", ("paper_id", "model"), planner) == (2, 2)


def test_a_row_with_null_in_its_key_is_kept_when_unchanged_and_replaced_when_changed(con, planner):
    published_and_staged(
        con,
        "topic_stats",
        "topic_id integer, label varchar, venue varchar, year integer, papers bigint",
        "(1, 'a', null, 2020, 5), (2, 'b', null, null, 3), (3, 'c', 'ICLR', null, 1)",
        "(1, 'a', null, 2020, 5), (2, 'b', null, null, 4), (3, 'c', 'ICLR', null, 1)",
    )
    assert plan(con, "topic_stats", ("topic_id", "venue", "year"), planner) == (
        [(2, None, None)],
        [(2, "b", None, None, 4)],
    )
    assert publish_plan(con, "topic_stats", ("topic_id", "venue", "year"), planner) == (1, 1)


def test_lists_and_structs_that_hash_alike_in_duckdb_are_still_changes(con, planner):
    # DuckDB's hash() alone gives each of these pairs one value.
    published_and_staged(
        con,
        "papers",
        "paper_id varchar, authors varchar[], keywords varchar[], "
        "links struct(url varchar, kind varchar)[]",
        "('empty', null, [], []), ('null_element', [null], [], []), "
        "('moved', ['a', 'b'], ['c'], []), ('struct', [], [], [null]), ('same', ['a'], [], [])",
        "('empty', [], [], []), ('null_element', [], [], []), "
        "('moved', ['a'], ['b', 'c'], []), ('struct', [], [], [{'url': null, 'kind': null}]), "
        "('same', ['a'], [], [])",
    )
    removed, added = plan(con, "papers", ("paper_id",), planner)
    assert removed == [("empty",), ("moved",), ("null_element",), ("struct",)]
    assert [row[0] for row in added] == ["empty", "moved", "null_element", "struct"]
    assert publish_plan(con, "papers", ("paper_id",), planner) == (4, 4)


def test_repeated_rows_count_as_except_all_counts_them(con, planner):
    published_and_staged(
        con,
        "mentions",
        "paper_id varchar, kind varchar, name varchar",
        "('p1', 'dataset', 'MNIST'), ('p2', 'dataset', 'CIFAR'), ('p2', 'dataset', 'CIFAR')",
        "('p1', 'dataset', 'MNIST'), ('p1', 'dataset', 'MNIST'), ('p2', 'dataset', 'CIFAR')",
    )
    assert plan(con, "mentions", ("paper_id", "kind", "name"), planner) == (
        [("p2", "dataset", "CIFAR")],
        [("p1", "dataset", "MNIST")],
    )


def test_a_new_table_or_a_changed_schema_is_replaced(con):
    con.execute(f"create table {STAGE}.topics (topic_id integer, label varchar)")
    assert plan_changes(con, "topics", ("topic_id",)) == "replace"
    con.execute(f"create table {LAKE}.main.topics (topic_id integer, label varchar, n bigint)")
    assert plan_changes(con, "topics", ("topic_id",)) == "replace"


def test_the_next_run_of_a_process_takes_what_it_published_until_the_catalog_changes(
    sample_run,
):
    import os

    import numpy as np

    from flows import publish
    from flows.publish.previous import read_previous

    settings = sample_run.settings
    kept = publish.previous_version(settings)
    assert publish.previous_version(settings) is kept  # not read again
    read = read_previous(settings)
    assert read is not kept
    assert (kept.version, kept.fingerprint) == (read.version, read.fingerprint)
    assert kept.version == sample_run.summary.version
    assert sorted(kept.centroids) == sorted(read.centroids) and len(kept.centroids) == 4
    for topic, centroid in read.centroids.items():
        np.testing.assert_array_equal(kept.centroids[topic], centroid)
    assert sorted(kept.papers.to_list()) == sorted(read.papers.to_list())
    assert len(kept.papers) == 38
    assert kept.assignments.sort("paper_id").equals(read.assignments.sort("paper_id"))
    assert kept.assignments["topic_id"].n_unique() == 4
    assert kept.coordinates.sort("paper_id").equals(read.coordinates.sort("paper_id"))

    # Another process's commit changes the catalog file: its state is read again.
    stat = settings.catalog_path.stat()
    os.utime(settings.catalog_path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000))
    again = publish.previous_version(settings)
    assert again is not kept and again.version == kept.version
    assert publish.previous_version(settings) is again  # what was read is kept too


def test_kept_row_hashes_serve_only_the_snapshot_that_wrote_them(con, tmp_path):
    """`PublishedRows` is read only while the catalog's latest snapshot is the one whose
    commit kept it: after any other commit, or in another catalog, the plan reads the
    catalog instead (a warehouse moved whole keeps them: the test below)."""
    settings = Settings(warehouse=tmp_path / "warehouse")
    con.execute(f"create table {LAKE}.main.topics (topic_id integer, label varchar)")
    con.execute(f"insert into {LAKE}.main.topics values (1, 'a'), (2, 'b')")
    frame = con.table(f"{LAKE}.main.topics").pl()
    kept = PublishedRows(settings)
    hashes = {name: row_hashes(frame.clear(), ("topic_id",)) for name in TABLE_KEYS}
    hashes["topics"] = row_hashes(frame, ("topic_id",))
    kept.save(con, hashes)
    loaded = kept.load(con)
    assert loaded is not None and loaded["topics"].equals(hashes["topics"])
    assert loaded["topics"].columns == ["topic_id", "_row_hash", "_copy"]
    # The same files, read beside another catalog whose snapshots have the same ids.
    other = connect(extensions=())
    attach(other, Settings(warehouse=tmp_path / "other"), create=True)
    other.execute(f"create table {LAKE}.main.topics (topic_id integer, label varchar)")
    other.execute(f"insert into {LAKE}.main.topics values (1, 'a'), (2, 'b')")
    assert kept.stamp(other)["snapshot"] == kept.stamp(con)["snapshot"]
    assert kept.load(other) is None
    other.close()
    # Hashes an earlier paperlake kept, made with the raw abstracts' texts, not their
    # hashes (flows/core/held.py): its stamp did not say so, and they are not used.
    stamp = cache.read_record(kept.stamp_path)
    cache.write_record(kept.stamp_path, {k: v for k, v in stamp.items() if k != "held_back"})
    assert kept.load(con) is None
    cache.write_record(kept.stamp_path, stamp)
    assert kept.load(con) is not None
    con.execute(f"insert into {LAKE}.main.topics values (3, 'c')")  # another commit
    assert kept.load(con) is None
    # A cache that cannot be written leaves the published version as it is, and no stamp.
    shutil.rmtree(kept.folder)
    kept.folder.write_text("a file where the folder would be")
    kept.save(con, hashes)
    assert kept.load(con) is None


def test_a_warehouse_moved_whole_keeps_what_its_last_commit_kept(sample_run, tmp_path):
    """A warehouse moved (or copied) with its cache plans its next publish from the
    digests its last commit kept, as where it was: the catalog is named by its snapshots,
    not by its path."""
    from flows.publish import PublishedDigests

    moved = Settings(warehouse=tmp_path / "moved", raw=sample_run.settings.raw)
    shutil.copytree(sample_run.settings.warehouse, moved.warehouse)
    kept = {}
    for settings in (sample_run.settings, moved):
        con = connect(extensions=())
        attach(con, settings, read_only=True)
        kept[settings.warehouse] = PublishedDigests(settings).load(con)
        con.close()
    assert set(kept[moved.warehouse]) == set(TABLE_KEYS)
    assert kept[moved.warehouse] == kept[sample_run.settings.warehouse]


def test_a_table_digest_ignores_row_order_and_sees_any_change_of_rows_or_types():
    import polars as pl

    from flows.publish import table_digest

    frame = pl.DataFrame({"id": [1, 2, 3], "label": ["a", "b", None], "terms": [["x"], [], ["y"]]})
    assert table_digest(frame) == table_digest(frame.reverse())
    changed = [
        frame.with_columns(label=pl.Series(["a", "b", "c"])),
        frame.with_columns(terms=pl.Series([["x"], [None], ["y"]])),
        frame.head(2),
        frame.vstack(frame.tail(1)),
        frame.with_columns(pl.col("id").cast(pl.Int32)),
        frame.rename({"label": "name"}),
    ]
    digests = {table_digest(other) for other in changed}
    assert len(digests) == len(changed) and table_digest(frame) not in digests


def test_kept_table_digests_serve_only_the_snapshot_that_wrote_them(con, tmp_path):
    from flows.publish import PublishedDigests

    settings = Settings(warehouse=tmp_path / "warehouse")
    con.execute(f"create table {LAKE}.main.topics (topic_id integer, label varchar)")
    kept = PublishedDigests(settings)
    assert kept.load(con) == {}  # none kept yet
    kept.save(con, {"topics": "d1"})
    assert kept.load(con) == {"topics": "d1"}
    con.execute(f"insert into {LAKE}.main.topics values (3, 'c')")  # another commit
    assert kept.load(con) == {}
    kept.path.write_text("{not json")
    assert kept.load(con) == {}


def small_versions(settings: Settings, count: int) -> dict[int, list]:
    """`count` published versions of a lake holding neighbors, each deleting one paper's
    rows and inserting two papers' (as runs do: a few small files a version); returns each
    version's rows."""
    from flows.core.lake import published_versions

    con = connect(extensions=())
    attach(con, settings, create=True)
    con.execute("create table neighbors (paper_id varchar, neighbor_id varchar, score double)")
    for n in range(count):
        con.execute("begin transaction")
        con.execute("delete from neighbors where paper_id = ?", [f"p{n - 1}"])
        for paper in (f"p{n}", f"q{n}"):
            con.execute("insert into neighbors values (?, 'x', ?), (?, 'y', ?)",
                        [paper, n / 10, paper, n / 20])  # fmt: skip
        con.execute(f"call {LAKE}.set_commit_message('paperlake', 'version')")
        con.execute("commit")
    rows = {
        v: con.execute(f"select * from neighbors at (version => {v}) order by all").fetchall()
        for v in published_versions(con)
    }
    con.close()
    return rows


def test_compacting_merges_each_tables_files_and_every_version_reads_as_before(tmp_path):
    from flows.core.lake import published_versions
    from flows.publish import PublishedDigests, compact

    settings = Settings(warehouse=tmp_path / "warehouse")
    rows = small_versions(settings, 6)
    assert len(rows) == 6 and rows[max(rows)] != rows[min(rows)]
    con = connect(extensions=())
    attach(con, settings, read_only=True)
    PublishedDigests(settings).save(con, {"neighbors": "digest of the latest"})
    latest = con.table("neighbors").pl()
    PublishedRows(settings).save(
        con, {name: row_hashes(latest, ("paper_id",)) for name in TABLE_KEYS}
    )
    con.close()
    on_disk = set((tmp_path / "warehouse" / "data").rglob("*.parquet"))

    done = compact(settings)
    # A file or more each version became one.
    assert (done.version, done.files_after) == (max(rows), {"neighbors": 1})
    assert done.files_before["neighbors"] >= len(rows)
    assert done.removed == len(on_disk - set((tmp_path / "warehouse" / "data").rglob("*.parquet")))
    assert done.removed > 0
    con = connect(extensions=())
    attach(con, settings)
    assert published_versions(con) == sorted(rows)  # compaction adds no version
    for version, expected in rows.items():
        got = con.execute(f"select * from neighbors at (version => {version}) order by all")
        assert got.fetchall() == expected
    # No row changed: the digests and row hashes kept for the next plan still serve it.
    assert PublishedDigests(settings).load(con) == {"neighbors": "digest of the latest"}
    kept = PublishedRows(settings).load(con)
    assert kept is not None and kept["neighbors"].equals(row_hashes(latest, ("paper_id",)))
    con.execute("insert into neighbors values ('r', 'x', 1.0)")
    next_snapshot = con.execute(f"select max(snapshot_id) from {LAKE}.snapshots()").fetchone()[0]
    assert next_snapshot > max(rows) + 1  # the next version's number skips compaction's
    con.close()


def test_compact_with_keep_files_leaves_them_for_a_later_compact(tmp_path):
    from typer.testing import CliRunner

    from flows.cli import app

    settings = Settings(warehouse=tmp_path / "warehouse")
    rows = small_versions(settings, 3)
    data = tmp_path / "warehouse" / "data"
    on_disk = set(data.rglob("*.parquet"))
    kept = CliRunner().invoke(app, ["compact", "--keep-files", "-w", str(settings.warehouse)])
    said = " ".join(kept.output.split())
    after_keep = set(data.rglob("*.parquet"))
    assert kept.exit_code == 0 and on_disk < after_keep  # the merged file beside them
    before = re.search(rf"at version {max(rows)}: (\d+) live files became 1; 0 files", said)
    assert before and int(before[1]) >= len(rows)  # a file or more each version
    later = CliRunner().invoke(app, ["compact", "-w", str(settings.warehouse)])
    gone = after_keep - set(data.rglob("*.parquet"))
    assert gone and gone <= on_disk
    said = " ".join(later.output.split())
    assert f"1 live files became 1; {len(gone)} files no version reads were removed" in said
    assert "│ neighbors │ 1 │ 1 │" in said


def test_compacting_no_warehouse_names_the_place_and_creates_nothing(tmp_path):
    from flows.core.errors import WarehouseError
    from flows.publish import compact

    with pytest.raises(WarehouseError, match=f"no warehouse at {tmp_path / 'none'}"):
        compact(Settings(warehouse=tmp_path / "none"))
    assert not (tmp_path / "none").exists()


def test_a_compaction_is_due_every_compact_every_versions(tmp_path):
    """`compact_when_due` (what a run does after publishing) compacts once compact_every
    versions came since the last compaction, and leaves on disk the files just left."""
    from flows.publish import compact_when_due

    settings = Settings(warehouse=tmp_path / "warehouse", compact_every=4)
    rows = small_versions(settings, 3)
    latest = max(rows)  # snapshot 1 made the table: versions 2, 3, 4
    assert compact_when_due(settings, latest - 1) is None  # 3 versions since none
    assert compact_when_due(settings.with_(compact_every=0), latest) is None  # never
    data = tmp_path / "warehouse" / "data"
    on_disk = set(data.rglob("*.parquet"))
    done = compact_when_due(settings, latest)
    assert done is not None and done.version == latest and done.files_after == {"neighbors": 1}
    assert done.removed == 0 and on_disk < set(data.rglob("*.parquet"))
    assert compact_when_due(settings, latest + 3) is None  # counted from this compaction


def test_a_plan_that_fails_rolls_back_and_leaves_the_catalog_detached(tmp_path, monkeypatch):
    """The merge scripts run in one transaction: one that fails leaves nothing staged, no
    transaction open and the catalog detached."""
    import duckdb
    import polars as pl

    from flows import publish
    from flows.publish import plan

    settings = Settings(warehouse=tmp_path / "warehouse")
    con = connect(extensions=("ducklake",))
    attach(con, settings, create=True)
    con.execute(f"create table {LAKE}.main.papers (paper_id varchar, title varchar)")
    publish.detach(con)
    monkeypatch.setattr(plan, "TABLE_KEYS", {"papers": ("paper_id",)})
    monkeypatch.setattr(
        plan,
        "merge_script",
        lambda *args: f"create table {STAGE}.half as select 1; select * from no_such_table",
    )
    frames = {"papers": pl.DataFrame({"paper_id": ["a"], "title": ["A title"]})}
    with pytest.raises(duckdb.CatalogException, match="no_such_table"):
        publish.prepare(con, settings, frames)
    databases = {
        r[0] for r in con.execute("select database_name from duckdb_databases()").fetchall()
    }
    assert LAKE not in databases
    assert con.execute(
        "select count(*) from duckdb_tables() where table_name = 'half'"
    ).fetchone() == (0,)
    con.execute("begin transaction")  # none was left open
    con.execute("commit")
    con.close()


def test_a_plan_compares_with_the_tables_the_last_commit_kept_while_the_catalog_is_unchanged(
    tmp_path,
):
    """`keep_committed` keeps a run's staging connection after its commit: its keyed tables
    become <name>__published and the rest is dropped. `take_committed` gives it back while
    the catalog is unchanged, and `prepare` then compares with those tables, not the
    catalog's (here a kept copy that lacks a row the catalog has shows which was read)."""
    import os

    import duckdb

    from flows.publish import detach, keep_committed, prepare, take_committed

    settings = Settings(warehouse=tmp_path / "warehouse")
    topics = "topic_id integer, label varchar"

    def staging(rows: str) -> duckdb.DuckDBPyConnection:
        con = connect(extensions=("ducklake",))
        con.execute(f"create table {STAGE}.topics ({topics})")
        con.execute(f"insert into {STAGE}.topics values {rows}")
        return con

    def tables(con) -> list[str]:
        return [r[0] for r in con.execute(
            "select table_name from duckdb_tables() where database_name = 'memory' order by 1"
        ).fetchall()]  # fmt: skip

    def added(con) -> list[tuple]:
        plans = prepare(con, settings)
        rows = con.execute(f"select * from {STAGE}.topics__added order by all").fetchall()
        detach(con)
        return plans["topics"], rows

    con = connect(extensions=("ducklake",))
    attach(con, settings, create=True)
    con.execute(f"create table {LAKE}.main.topics ({topics})")
    con.execute(f"insert into {LAKE}.main.topics values (1, 'a'), (2, 'b')")
    detach(con)
    con.close()

    first = staging("(1, 'a'), (2, 'b')")
    first.execute(f"create table {STAGE}.runs (run_id varchar)")  # a history table: dropped
    assert keep_committed(settings, first)
    assert tables(first) == ["topics__published"]
    stat = settings.catalog_path.stat()  # another process's commit changes the catalog
    os.utime(settings.catalog_path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000))
    assert take_committed(settings) is None
    with pytest.raises(duckdb.ConnectionException):  # the stale one was closed
        first.execute("select 1")

    second = staging("(1, 'a'), (2, 'b')")
    assert keep_committed(settings, second)
    second.execute(f"delete from {STAGE}.topics__published where topic_id = 2")
    assert take_committed(settings) is second
    assert take_committed(settings) is None  # taken: one run plans with it
    second.execute(f"create table {STAGE}.topics as select * from (values (1, 'a'), (2, 'b'), "
                   "(3, 'c')) t(topic_id, label)")  # fmt: skip
    assert added(second) == ("merge", [(2, "b"), (3, "c")])  # from the kept copy
    fresh = staging("(1, 'a'), (2, 'b'), (3, 'c')")
    assert added(fresh) == ("merge", [(3, "c")])  # from the catalog
    for con in (second, fresh):
        con.close()
