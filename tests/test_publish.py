"""Publish plans each table's change by key and row hash: what it deletes and inserts."""

from __future__ import annotations

import shutil

import pytest

from flows.lake import LAKE, attach, connect
from flows.publish import (
    STAGE,
    PublishedRows,
    apply_changes,
    plan_changes,
    plan_from_hashes,
    row_hashes,
)
from flows.settings import Settings
from flows.tables import keyed_tables

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


@pytest.fixture(params=["catalog", "hashes"])
def planner(request):
    """Both ways a publish is planned: the staged table against the catalog's
    (`plan_changes`), and the table's row hashes against those kept of the catalog's rows
    (`plan_from_hashes`, here given the lake table's hashes)."""
    if request.param == "catalog":
        return plan_changes

    def from_hashes(con, name: str, keys: tuple[str, ...]) -> str:
        lake = con.table(f"{LAKE}.main.{name}").pl()
        frame = con.table(f"{STAGE}.{name}").pl()
        hashes, published = row_hashes(frame, keys), row_hashes(lake, keys)
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

    settings = sample_run.settings
    kept = publish.previous_version(settings)
    assert publish.previous_version(settings) is kept  # not read again
    read = publish.read_previous(settings)
    assert read is not kept
    assert (kept.version, kept.fingerprint) == (read.version, read.fingerprint)
    assert kept.version == sample_run.summary.version
    assert sorted(kept.centroids) == sorted(read.centroids) and len(kept.centroids) == 4
    for topic, centroid in read.centroids.items():
        np.testing.assert_array_equal(kept.centroids[topic], centroid)
    assert sorted(kept.papers.to_list()) == sorted(read.papers.to_list())
    assert len(kept.papers) == 38
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
    catalog instead."""
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
    elsewhere = PublishedRows(Settings(warehouse=tmp_path / "other"))
    elsewhere.folder = kept.folder  # the same files, said of another catalog
    assert elsewhere.load(con) is None
    con.execute(f"insert into {LAKE}.main.topics values (3, 'c')")  # another commit
    assert kept.load(con) is None
    # A cache that cannot be written leaves the published version as it is, and no stamp.
    shutil.rmtree(kept.folder)
    kept.folder.write_text("a file where the folder would be")
    kept.save(con, hashes)
    assert kept.load(con) is None


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
