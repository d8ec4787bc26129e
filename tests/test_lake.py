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


def test_a_reader_holding_the_catalog_makes_a_writer_wait_then_say_who(
    sample_run, tmp_path, monkeypatch, caplog
):
    import subprocess
    import sys
    import time

    from flows import lake

    copy = tmp_path / "warehouse"
    shutil.copytree(sample_run.settings.warehouse, copy, ignore=shutil.ignore_patterns(".lock"))
    reader = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from flows.lake import open_lake; from flows.settings import "
         f"Settings; con = open_lake(Settings(warehouse={str(copy)!r})); print('open', "
         "flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert reader.stdout.readline().strip() == "open"
        monkeypatch.setattr(lake, "ATTACH_WAIT_SECONDS", 2)
        con = lake.connect()
        started = time.monotonic()
        with pytest.raises(lake.WarehouseBusy, match="still in use after 2 s"):
            lake.attach(con, Settings(warehouse=copy), create=True)
        assert 2 <= time.monotonic() - started < 10
        assert any("waiting up to 2 s for catalog" in r.message for r in caplog.records)
    finally:
        reader.kill()
        reader.wait()


def test_the_query_command_refuses_and_the_warehouse_is_untouched(sample_run):
    from typer.testing import CliRunner

    from flows.cli import app

    warehouse = str(sample_run.settings.warehouse)
    for sql, refused in (
        ("USE memory; DETACH lake", "refused a SET (or USE) statement"),
        ("DROP TABLE papers", "refused a DROP statement"),
        ("CALL ducklake_expire_snapshots('lake', versions => [1])", "refused a CALL"),
    ):
        result = CliRunner().invoke(app, ["query", sql, "-w", warehouse])
        assert result.exit_code == 1 and refused in result.output, result.output
        assert "Traceback" not in result.output
    assert papers_and_versions(warehouse) == (38, [1])


def test_the_readme_duckdb_recipe_opens_the_warehouse(sample_run, monkeypatch):
    from flows.lake import connect
    from flows.settings import PROJECT_ROOT

    readme = (PROJECT_ROOT / "README.md").read_text()
    recipe = readme[readme.index("ATTACH 'ducklake:warehouse") :].split(";", 1)[0]
    monkeypatch.chdir(sample_run.settings.warehouse.resolve().parent)
    con = connect()
    con.execute(recipe)
    assert con.execute("select count(*) from lake.papers").fetchone() == (38,)
    con.close()
