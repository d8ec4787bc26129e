"""The warehouse opens the same whatever its path looks like: relative, absolute, through a
symlink, from another working directory, or copied elsewhere."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from flows.core.errors import QueryRefused
from flows.core.lake import open_lake, published_versions
from flows.core.settings import Settings
from flows.read.query import read_only_query


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

    from flows.core import lake

    copy = tmp_path / "warehouse"
    shutil.copytree(sample_run.settings.warehouse, copy, ignore=shutil.ignore_patterns(".lock"))
    reader = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from flows.core.lake import open_lake; from flows.core.settings import "
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
    from flows.core.lake import connect
    from flows.core.settings import PROJECT_ROOT

    page = (PROJECT_ROOT / "docs" / "python-api.md").read_text()
    recipe = page[page.index("ATTACH 'ducklake:warehouse") :].split(";", 1)[0]
    monkeypatch.chdir(sample_run.settings.warehouse.resolve().parent)
    con = connect()
    con.execute(recipe)
    assert con.execute("select count(*) from lake.papers").fetchone() == (38,)
    con.close()


def test_attach_statement_gives_the_data_path_and_options():
    from flows.core.lake import attach_statement

    assert attach_statement("w/catalog.ducklake", "/abs/w/data") == (
        "ATTACH 'ducklake:w/catalog.ducklake' AS lake (DATA_PATH '/abs/w/data/', "
        "OVERRIDE_DATA_PATH true, DATA_INLINING_ROW_LIMIT 0)"
    )
    # A shared catalog read with the data path it recorded, at a version, read only.
    assert attach_statement("postgres:dbname=lake host=db", None, version=3, read_only=True) == (
        "ATTACH 'ducklake:postgres:dbname=lake host=db' AS lake "
        "(DATA_INLINING_ROW_LIMIT 0, SNAPSHOT_VERSION 3, READ_ONLY)"
    )


@pytest.mark.parametrize(
    ("catalog", "conninfo", "shown"),
    [
        (None, None, None),
        ("postgresql://ana:s3cret@db:5433/lake", "postgresql://ana:s3cret@db:5433/lake",
         "postgresql://ana@db:5433/lake"),
        ("postgres://ana@db/lake?password=s3cret&sslmode=require", None,
         "postgres://ana@db/lake?sslmode=require"),
        ("postgres:dbname=lake host=db port=5433 password=s3cret", None,
         "dbname=lake host=db port=5433"),
    ],
)  # fmt: skip
def test_a_postgres_catalog_is_named_without_its_password(tmp_path, catalog, conninfo, shown):
    from flows.core.lake import catalog_name, postgres_conninfo

    settings = Settings(warehouse=tmp_path, catalog=catalog)
    if conninfo:
        assert postgres_conninfo(settings) == conninfo
    assert catalog_name(settings) == (shown or str(tmp_path / "catalog.ducklake"))
    assert "s3cret" not in catalog_name(settings)


def test_an_unknown_catalog_is_a_clear_error(tmp_path):
    from flows.core.lake import WarehouseError, catalog_exists

    with pytest.raises(WarehouseError, match=r"catalog 'mysql://db/lake' is not supported"):
        catalog_exists(Settings(warehouse=tmp_path, catalog="mysql://db/lake"))


def test_an_s3_data_path_is_given_as_is_and_loads_httpfs(tmp_path):
    from flows.core.lake import attach, connect, data_path_option, needed_extensions

    settings = Settings(warehouse=tmp_path / "w", data_path="s3://paperlake-test/lake")
    assert needed_extensions(settings) == ("ducklake", "httpfs")
    assert needed_extensions(Settings(warehouse=tmp_path)) == ("ducklake",)
    assert data_path_option(settings, exists=False) == "s3://paperlake-test/lake"
    assert not (tmp_path / "w" / "data").exists() and not Path("s3:").exists()
    # Attaching reaches no bucket: the catalog is made and records the s3 data path.
    con = connect()
    attach(con, settings, create=True)
    loaded = "select loaded from duckdb_extensions() where extension_name = 'httpfs'"
    assert con.execute(loaded).fetchone() == (True,)
    recorded = "select value from lake.options() where option_name = 'data_path'"
    assert con.execute(recorded).fetchone() == ("s3://paperlake-test/lake/",)
    con.close()


def test_a_persistent_s3_secret_reaches_every_paperlake_connection(tmp_path):
    """docs/cluster-and-catalog.md's recipe: one CREATE PERSISTENT SECRET a machine, runs use it."""
    import os
    import subprocess
    import sys

    code = (
        "import sys; from flows.core.lake import attach, connect, load_extension\n"
        "from flows.core.settings import Settings\n"
        "con = connect(); load_extension(con, 'httpfs')\n"
        'con.execute("CREATE PERSISTENT SECRET lake_s3 (TYPE s3, PROVIDER config, '
        "KEY_ID 'AKIAEXAMPLE', SECRET 'example', REGION 'eu-west-1', "
        "SCOPE 's3://paperlake-test')\"); con.close()\n"
        "con = connect()\n"
        "attach(con, Settings(warehouse=sys.argv[1], data_path='s3://paperlake-test/lake'), "
        "create=True)\n"
        'print(con.execute("select name from which_secret('
        "'s3://paperlake-test/lake/main/papers/f.parquet', 's3')\").fetchone()[0])\n"
    )
    env = {**os.environ, "HOME": str(tmp_path)}  # the secret lands in HOME/.duckdb/
    found = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "w")], env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "lake_s3"
    assert (tmp_path / ".duckdb" / "stored_secrets" / "lake_s3.duckdb_secret").exists()


def test_s3_credentials_from_the_environment_reach_the_connection(tmp_path):
    import os
    import subprocess
    import sys

    code = (
        "import sys; from flows.core.lake import attach, connect\n"
        "from flows.core.settings import Settings\n"
        "con = connect()\n"
        "attach(con, Settings(warehouse=sys.argv[1], data_path='s3://paperlake-test/lake'), "
        "create=True)\n"
        "print(*con.execute(\"select current_setting('s3_access_key_id'), "
        "current_setting('s3_region')\").fetchone())\n"
    )
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "AKIAFROMENV", "AWS_SECRET_ACCESS_KEY": "x",
           "AWS_REGION": "eu-west-1"}  # fmt: skip
    found = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "w")], env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == ["AKIAFROMENV", "eu-west-1"]


def test_a_connection_without_extensions_attaches_the_lake(tmp_path):
    from flows.core.lake import attach, connect

    settings = Settings(warehouse=tmp_path / "w")
    con = connect(extensions=())
    try:
        attach(con, settings, create=True)  # loads ducklake itself
        loaded = con.execute(
            "select extension_name from duckdb_extensions() where loaded "
            "and extension_name in ('ducklake', 'vss', 'fts') order by 1"
        ).fetchall()
        assert loaded == [("ducklake",)]
    finally:
        con.close()
