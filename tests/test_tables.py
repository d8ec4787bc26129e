"""The table registry is the one place tables are declared: the warehouse, publish, the
suites and `paperlake tables` agree with it, and a SQL table is declared by its file."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from flows import publish, validate
from flows.cli import app
from flows.core import tables
from flows.core.lake import open_lake


def test_published_tables_have_exactly_the_registered_columns(sample_run):
    with open_lake(sample_run.settings) as con:
        for table in tables.registry():
            columns = [r[0] for r in con.execute(f"describe lake.main.{table.name}").fetchall()]
            assert columns == [c for c, _ in table.columns], table.name


def test_publish_takes_keys_from_the_registry_and_every_table_has_a_suite():
    assert {t.name: t.keys for t in tables.registry() if not t.history} == publish.TABLE_KEYS
    assert publish.HISTORY_TABLES == ("dq_results", "runs")
    for table in tables.registry():
        assert table.suite is not None, table.name
    for name in validate.suite_names():
        assert validate.Suite.load(name).id_columns == tables.table(name).row_names


def test_sql_tables_are_built_after_every_table_they_read():
    order = tables.sql_tables()
    assert set(order) >= {
        "neighbors", "duplicates", "duplicate_groups", "topic_terms", "topics", "topic_stats",
        "mentions", "venue_stats", "source_stats",
    }  # fmt: skip
    for position, name in enumerate(order):
        table = tables.table(name)
        assert table.sql.exists()
        assert table.reads, name
        for read in table.reads:
            if read in order:
                assert order.index(read) < position, (name, read)
    assert order.index("topic_terms") < order.index("topics") < order.index("topic_stats")


def test_what_a_table_reads_counts_through_the_tables_it_reads():
    assert tables.reads_any("neighbors", {"neighbor_candidates"})
    assert tables.reads_any("topic_stats", {"topic_centroids"})  # through topics
    assert not tables.reads_any("venue_stats", {"neighbor_candidates", "similar_pairs"})


def test_a_header_is_read_field_by_field(tmp_path):
    path = tmp_path / "things.sql"
    path.write_text(
        "-- things: Things per paper.\n"
        "-- grain: one row per (paper_id, thing).\n"
        "-- key: paper_id, thing\n"
        "-- reads: papers, paper_topics\n"
        "-- references: paper_id -> papers\n"
        "-- columns:\n"
        "--   paper_id: the paper\n"
        "--   thing: a thing it names\n"
        "-- Prose that follows is not a field.\n"
        "with final as (select 1) select * from final\n"
    )
    table = tables.parse_header(path)
    assert table.name == "things" and table.description == "Things per paper."
    assert table.grain == "one row per (paper_id, thing)."
    assert table.keys == ("paper_id", "thing")
    assert table.reads == ("papers", "paper_topics")
    assert table.references == (("paper_id", "papers"),)
    assert table.columns == (("paper_id", "the paper"), ("thing", "a thing it names"))


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("-- other: wrong name.\n", "first line must read '-- things: <description>'"),
        ("-- things: no key.\n-- grain: g\n-- reads: papers\n-- columns:\n--   a: b\n", "key"),
        ("-- things: no columns.\n-- grain: g\n-- key: a\n-- reads: papers\n", "columns"),
    ],
)
def test_a_header_that_declares_too_little_names_its_file(tmp_path, header, message):
    path = tmp_path / "things.sql"
    path.write_text(header + "select 1\n")
    with pytest.raises(tables.HeaderError, match=message) as caught:
        tables.parse_header(path)
    assert str(path) in str(caught.value)


def test_every_reference_points_at_a_table_with_one_key_column():
    found = tables.references()
    assert ("neighbors", "neighbor_id", "papers", "paper_id") in found
    assert ("paper_sources", "source_path", "sources", "path") in found
    assert ("topic_terms", "topic_id", "topics", "topic_id") in found


def test_every_uniqueness_check_is_on_the_registered_key():
    """The mentions suite once named its rows by (paper_id, name) while publish merged them
    by (paper_id, kind, name); every unique check now checks the key itself."""
    for name in validate.suite_names():
        spec = json.loads(tables.table(name).suite.read_text())
        for expectation in spec["expectations"]:
            kwargs = expectation["kwargs"]
            if expectation["type"] == "expect_compound_columns_to_be_unique":
                assert tuple(kwargs["column_list"]) == tables.table(name).keys, name
            if (
                expectation["type"] == "expect_column_values_to_be_unique"
                and len(tables.table(name).keys) == 1
            ):
                assert (kwargs["column"],) == tables.table(name).keys, name
    assert tables.table("mentions").keys == ("paper_id", "kind", "name")


def test_paperlake_tables_lists_every_table_and_shows_one(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    listed = CliRunner().invoke(app, ["tables", "--format", "csv"])
    assert listed.exit_code == 0, listed.output
    for table in tables.registry():
        assert f"{table.name}," in listed.output and table.description in listed.output
    one = CliRunner().invoke(app, ["tables", "neighbors", "--format", "csv"])
    assert one.exit_code == 0, one.output
    assert "grain: one row per (paper_id, neighbor_id)" in one.output
    assert "neighbor_id,a near paper,papers" in one.output
    missing = CliRunner().invoke(app, ["tables", "nothing"])
    assert missing.exit_code == 1 and "no table 'nothing'" in missing.output
