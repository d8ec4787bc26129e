"""The table registry is the one place tables are declared: the warehouse, publish, the
suites and the README agree with it."""

from __future__ import annotations

import json

from flows import publish, validate
from flows.core import tables
from flows.core.lake import open_lake
from flows.core.settings import PROJECT_ROOT
from flows.derive import build


def test_published_tables_have_exactly_the_registered_columns(sample_run):
    with open_lake(sample_run.settings) as con:
        for table in tables.TABLES:
            columns = [r[0] for r in con.execute(f"describe lake.main.{table.name}").fetchall()]
            assert columns == [c for c, _ in table.columns], table.name


def test_publish_aggregate_and_suites_take_keys_and_order_from_the_registry():
    assert {t.name: t.keys for t in tables.TABLES if not t.history} == publish.TABLE_KEYS
    assert publish.HISTORY_TABLES == ("dq_results", "runs")
    assert build.SQL_TABLES == (
        "neighbors", "duplicates", "duplicate_groups", "topic_terms", "topics", "topic_stats",
        "mentions",
        "venue_stats", "source_stats",
    )  # fmt: skip
    assert all(tables.table(name).sql.exists() for name in build.SQL_TABLES)
    for name in validate.suite_names():
        assert validate.Suite.load(name).id_columns == tables.table(name).keys
        assert tables.table(name).suite is not None


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


def test_readme_lists_every_table_with_its_registered_description():
    readme = (PROJECT_ROOT / "README.md").read_text()
    for table in tables.TABLES:
        assert f"| `{table.name}` | " in readme and table.description in readme, table.name
