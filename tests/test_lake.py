"""The warehouse opens the same whatever its path looks like: relative, absolute, through a
symlink, from another working directory, or copied elsewhere."""

from __future__ import annotations

import re
import shutil

import pytest

from flows.lake import QueryRefused, open_lake, published_versions, read_only_query
from flows.settings import Settings


def papers_and_versions(warehouse) -> tuple[int, list[int]]:
    with open_lake(Settings(warehouse=warehouse)) as con:
        return con.execute("select count(*) from papers").fetchone()[0], published_versions(con)


def test_any_spelling_of_the_warehouse_path_opens_the_same(sample_run, tmp_path, monkeypatch):
    original = sample_run.settings.warehouse.resolve()
    expected = papers_and_versions(original)
    assert expected == (38, [1])

    link = tmp_path / "link"
    link.symlink_to(original)
    assert papers_and_versions(link) == expected

    monkeypatch.chdir(original.parent)
    assert papers_and_versions(original.name) == expected  # relative, as `make run` makes it
    monkeypatch.chdir(tmp_path)
    assert papers_and_versions(original) == expected  # absolute, from elsewhere

    copy = tmp_path / "copy" / "warehouse"
    shutil.copytree(original, copy, ignore=shutil.ignore_patterns(".lock"))
    assert papers_and_versions(copy) == expected
    assert papers_and_versions("copy/warehouse") == expected


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        ("USE memory; DETACH lake", "SET (or USE)"),
        ("DETACH lake", "DETACH"),
        ("ATTACH 'ducklake:w/catalog.ducklake' AS l2 (DATA_PATH 'w/data/')", "ATTACH"),
        ("DROP TABLE papers", "DROP"),
        ("CALL ducklake_expire_snapshots('lake', versions => [1])", "CALL"),
        ("SELECT * FROM ducklake_expire_snapshots('lake', dry_run => true)", "ducklake_expire"),
        ("COPY (SELECT 1) TO 'warehouse/catalog.ducklake'", "COPY"),
        ("EXPORT DATABASE 'out'", "EXPORT"),
        ("INSTALL httpfs", "LOAD"),
        ("LOAD httpfs", "LOAD"),
        ("CREATE TABLE t AS SELECT 1", "CREATE"),
        ("INSERT INTO papers SELECT * FROM papers", "INSERT"),
        ("UPDATE papers SET title = 'x'", "UPDATE"),
        ("DELETE FROM papers", "DELETE"),
        ("SELECT 1; DROP TABLE papers", "DROP"),
        ("", "empty"),
    ],
)
def test_query_refuses_every_statement_that_could_change_the_warehouse(sql, refused):
    with pytest.raises(QueryRefused, match=re.escape(refused)):
        read_only_query(sql)


def test_query_allows_reading_statements():
    for sql in ("select 1", "from papers", "describe papers", "show tables", "explain select 1",
                "with t as (select 1 as x) select * from t", "summarize papers"):  # fmt: skip
        assert read_only_query(sql) == sql
