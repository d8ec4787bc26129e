"""`paperlake query` reads its warehouse and nothing else: files outside the data path,
extensions, maintenance functions however the SQL spells them; every value type prints in
every format; Ctrl-C and SIGTERM stop a long query with one line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.core.errors import QueryRefused
from flows.core.lake import attach, connect, open_lake, published_versions
from flows.core.settings import PROJECT_ROOT, Settings
from flows.publish import history

PAPERLAKE = Path(sys.executable).with_name("paperlake")


def invoke(*args, env=None):
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def paperlake(*args: object, timeout: float = 120) -> subprocess.CompletedProcess:
    """`paperlake ARGS` as a user runs it (a crash stays in its own process)."""
    return subprocess.run(
        [PAPERLAKE, *map(str, args)], cwd=PROJECT_ROOT, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def state(warehouse: Path) -> tuple[str, list[tuple[str, int]]]:
    """What a query must leave as it was: the version's checksum and every data file."""
    data = warehouse / "data"
    files = sorted((str(p.relative_to(data)), p.stat().st_size) for p in data.rglob("*"))
    return history.checksums(Settings(warehouse=warehouse))[2], files


def schedule_a_deletion(source: Path, warehouse: Path) -> Path:
    """A copy of warehouse `source` holding a data file that DuckLake has scheduled for
    deletion (version 2 empties topic_terms, version 1 is expired), as compaction or expiry
    leave them: what `ducklake_cleanup_old_files` deletes."""
    shutil.copytree(source, warehouse, ignore=shutil.ignore_patterns(".lock"))
    con = connect(extensions=())
    attach(con, Settings(warehouse=warehouse))
    con.execute("begin")
    con.execute("delete from topic_terms")
    con.execute("call lake.set_commit_message('paperlake', 'test: topic_terms emptied')")
    con.execute("commit")
    con.execute("select * from ducklake_expire_snapshots('lake', versions => [1])").fetchall()
    dry_run = (
        "select path from ducklake_cleanup_old_files('lake', cleanup_all => true, dry_run => true)"
    )
    assert [Path(p).parent.name for (p,) in con.execute(dry_run).fetchall()] == ["topic_terms"]
    assert published_versions(con) == [2]
    con.close()
    return warehouse


@pytest.fixture(scope="module")
def scheduled(sample_run, tmp_path_factory) -> Path:
    """The sample warehouse with a file scheduled for deletion (see schedule_a_deletion)."""
    warehouse = tmp_path_factory.mktemp("scheduled") / "warehouse"
    return schedule_a_deletion(sample_run.settings.warehouse, warehouse)


def refusal(result, starts: str) -> str:
    """The one line a refused query prints; asserts it is all it prints."""
    output = result.output if hasattr(result, "output") else result.stdout + result.stderr
    code = result.exit_code if hasattr(result, "exit_code") else result.returncode
    assert code == 1, output
    assert "Traceback" not in output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), output
    return lines[0]


@pytest.mark.parametrize(
    ("sql", "path"),
    [
        ("select content from read_text('/etc/passwd')", "/etc/passwd"),
        ("select count(*) from glob('/root/**')", "/root/**"),
        ("select * from read_csv('/etc/passwd', sep = ':')", "/etc/passwd"),
        ("select * from sniff_csv('/etc/passwd')", "/etc/passwd"),
        ("select * from read_blob('/etc/hostname')", "/etc/hostname"),
        ("select * from read_json('/etc/os-release')", "/etc/os-release"),
        ("select * from parquet_metadata('/etc/passwd')", "/etc/passwd"),
        ("select * from read_text('{data}/../../../../etc/passwd')",
         "{data}/../../../../etc/passwd"),
        ("select count(*) from read_parquet('{other}/data/main/papers/*.parquet')", "{other}/data"),
        ("select * from read_duckdb('{other}/catalog.ducklake', table_name => 'ducklake_snapshot')",
         "{other}/catalog.ducklake"),
        ("select * from read_text('https://example.org/x')", "https://example.org/x"),
    ],
)  # fmt: skip
def test_files_outside_the_data_path_are_refused_in_one_line(scheduled, sample_run, sql, path):
    other = sample_run.settings.warehouse  # another warehouse's files
    where = {"data": scheduled.resolve() / "data", "other": other.resolve()}
    before = state(scheduled)
    result = invoke("query", sql.format(**where), "-w", scheduled)
    line = refusal(result, f"error: refused reading {path.format(**where)}")
    assert line.endswith(f"reads only the warehouse's data files, under {where['data']}/")
    assert state(scheduled) == before


def test_the_warehouse_s_own_data_files_can_be_read(sample_run):
    data = sample_run.settings.warehouse.resolve() / "data"
    sql = f"select count(*) as n from read_parquet('{data}/main/papers/*.parquet')"
    assert invoke("query", sql, "-w", data.parent, "--format", "csv").stdout == "n\n38\n"
    sql = f"select count(*) > 10 as many from glob('{data}/**')"
    assert invoke("query", sql, "-w", data.parent, "--format", "csv").stdout == "many\ntrue\n"


def test_an_extension_query_needs_is_refused_without_a_download(scheduled):
    before = state(scheduled)
    result = paperlake("query", "select * from sqlite_scan('/tmp/x.db', 't')", "-w", scheduled)
    line = refusal(result, "error: refused: sqlite_scan needs DuckDB's sqlite_scanner extension")
    assert "connection" not in line and "http" not in line  # no install was tried
    assert state(scheduled) == before


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        ("select * from query('select * from ducklake_' || 'cleanup_old_files(''lake'')')",
         "query() of built SQL"),
        ("select * from query('select * from ducklake_' || "
         "'cleanup_old_files(''lake'', cleanup_all => true)')", "query() of built SQL"),
        ("select * from query('select * from query(''select * from ducklake_'' || "
         "''expire_snapshots(''''lake'''', versions => [2])'')')", "query() of built SQL"),
        ("select * from ducklake_cleanup_old_files('lake', cleanup_all => true)",
         "ducklake_cleanup_old_files"),
        ('select * from "DuckLake_Cleanup_Old_Files"/**/(\'lake\', cleanup_all => true)',
         "ducklake_cleanup_old_files"),
        ("select * from query(e'select * from ducklake\\x5fcleanup_old_files(''lake'', "
         "cleanup_all => true)')", "ducklake_cleanup_old_files"),
        ("select * from lake.set_option('data_inlining_row_limit', 10)", "set_option"),
        ("explain analyze select * from ducklake_delete_orphaned_files('lake', cleanup_all => "
         "true)", "ducklake_delete_orphaned_files"),
        ("with t as (select * from ducklake_merge_adjacent_files('lake')) select count(*) from t",
         "ducklake_merge_adjacent_files"),
        ("select * from json_execute_serialized_sql(json_serialize_sql('select * from "
         "ducklake_cleanup_old_files(''lake'', cleanup_all => true)'))",
         "json_execute_serialized_sql"),
        ("select * from checkpoint('lake')", "checkpoint"),
    ],
)  # fmt: skip
def test_maintenance_functions_are_refused_however_the_sql_spells_them(scheduled, sql, refused):
    before = state(scheduled)
    refusal(paperlake("query", sql, "-w", scheduled), f"error: refused {refused}")
    assert state(scheduled) == before


def test_the_plan_check_refuses_what_the_text_hides(scheduled):
    """The plan alone holds: SQL that query() builds from parts is refused by the calls it
    plans, and a runtime executor of serialized SQL by its own name."""
    from flows.read.query import check_plan, open_locked

    before = state(scheduled)
    lake = open_locked(Settings(warehouse=scheduled))
    with lake.con as con:
        for sql, refused in (
            ("select * from query('select * from ducklake_' || 'cleanup_old_files(''lake'', "
             "cleanup_all => true)')", "ducklake_cleanup_old_files"),
            ("select 1 where exists (select * from query_table('papers'), query('from "
             "ducklake_' || 'expire_snapshots(''lake'', versions => [2])'))",
             "ducklake_expire_snapshots"),
            ("select * from json_execute_serialized_sql(json_serialize_sql('select 1'))",
             "json_execute_serialized_sql"),
        ):  # fmt: skip
            with pytest.raises(QueryRefused, match=f"^refused {refused}: "):
                check_plan(con, sql)
        check_plan(con, "select * from query('select count(*) from ' || 'papers')")
    assert state(scheduled) == before


def test_a_read_only_attach_alone_lets_cleanup_delete_files(sample_run, tmp_path):
    """Why the plan is checked: on a catalog attached READ_ONLY, DuckLake's cleanup deletes
    the scheduled files first and only then fails to update the catalog."""
    warehouse = schedule_a_deletion(sample_run.settings.warehouse, tmp_path / "warehouse")
    scheduled_file = next((warehouse / "data" / "main" / "topic_terms").glob("*.parquet"))
    with (
        open_lake(Settings(warehouse=warehouse)) as con,
        pytest.raises(duckdb.Error, match="read-only mode"),
    ):
        con.execute("select * from ducklake_cleanup_old_files('lake', cleanup_all => true)")
    assert not scheduled_file.exists()


def test_the_query_connection_is_locked_down(sample_run):
    from flows.read.query import open_locked

    lake = open_locked(sample_run.settings)
    with lake.con as con:
        setting = "select current_setting('{}')"
        assert [con.execute(setting.format(name)).fetchone()[0] for name in (
            "enable_external_access", "autoinstall_known_extensions",
            "autoload_known_extensions", "lock_configuration",
        )] == [False, False, False, True]  # fmt: skip
        allowed = con.execute(setting.format("allowed_directories")).fetchone()[0]
        assert lake.data_path == f"{sample_run.settings.warehouse.resolve()}/data/"
        assert lake.data_path in allowed
        with pytest.raises(duckdb.Error, match="configuration has been locked"):
            con.execute("set enable_external_access = true")
        with pytest.raises(duckdb.Error, match="configuration has been locked"):
            con.execute("set allowed_directories = ['/']")
        with pytest.raises(duckdb.PermissionException):
            con.execute("install sqlite_scanner")


def readme_example_queries() -> list[str]:
    page = (PROJECT_ROOT / "docs" / "cli.md").read_text()
    block = page.split("Example queries", 1)[1].split("```sql", 1)[1].split("```", 1)[0]
    return [s.strip() for s in block.split(";") if s.strip()]


@pytest.mark.parametrize(
    "sql",
    [
        *readme_example_queries(),
        *(f.read_text() for f in sorted((PROJECT_ROOT / "sql" / "queries").glob("*.sql"))),
        "describe papers",
        "show tables",
        "summarize venue_stats",
        "explain select count(*) from papers",
        "explain analyze select count(*) from papers",
        "/* why */ explain select 1",
        "select 1; select 2",
        "select * from query('select count(*) from papers')",
        "select * from query_table('venue_stats')",
        "select * from lake.snapshots()",
        "select * from ducklake_table_info('lake')",
        "select * from ducklake_list_files('lake', 'papers')",
        "select * from ducklake_table_changes('lake', 'main', 'papers', 0, 1) limit 3",
        "select count(*) from papers at (version => 1)",
        "select stem('running', 'porter') as stem",
        "select array_cosine_similarity(embedding, embedding) from embedding_vectors limit 1",
        "select * from vss_match(embedding_vectors, (select embedding from embedding_vectors "
        "limit 1), embedding, 3)",
    ],
)
def test_every_reading_query_still_runs(sample_run, sql):
    result = invoke("query", "-w", sample_run.settings.warehouse, "--format", "jsonl", "--", sql)
    assert result.exit_code == 0, result.output


def test_reading_queries_give_exact_rows(sample_run):
    wh = sample_run.settings.warehouse
    runs = [
        ("select count(*) as n from embedding_vectors", [{"n": 38}]),
        ("select stem('running', 'porter') as s", [{"s": "run"}]),
        ("select * from query('select count(*) as n from papers')", [{"n": 38}]),
        ("select 1 as a; select 2 as b", [{"b": 2}]),
        ("select count(*) as n from papers at (version => 1)", [{"n": 38}]),
    ]
    for sql, rows in runs:
        assert json.loads(invoke("query", sql, "-w", wh, "--format", "json").stdout) == rows


def publish_table(settings: Settings, create: str) -> None:
    """Make the catalog of `settings` with one table, `create`, as its one version."""
    con = connect(extensions=())
    attach(con, settings, create=True)
    con.execute("begin")
    con.execute(create)
    con.execute("call lake.set_commit_message('paperlake', 'test: one table')")
    con.execute("commit")
    con.close()


def test_an_s3_data_path_is_the_one_place_a_query_reads(tmp_path):
    from flows.read.query import open_locked, run_query

    settings = Settings(warehouse=tmp_path / "w", data_path="s3://paperlake-test/lake")
    publish_table(settings, "create table t (x integer)")  # no rows, no file: no bucket reached
    lake = open_locked(settings)
    with lake.con as locked:
        allowed = locked.execute("select current_setting('allowed_directories')").fetchone()[0]
    assert lake.data_path == "s3://paperlake-test/lake/" and lake.data_path in allowed
    assert run_query(settings, "select count(*) as n from t").to_dicts() == [{"n": 0}]
    with pytest.raises(QueryRefused, match="refused reading s3://other-bucket/x"):
        run_query(settings, "select * from read_text('s3://other-bucket/x')")


def test_a_postgres_catalog_reads_only_the_data_path_it_recorded(tmp_path):
    """A reader that gives only the catalog's URL is held to the data path the catalog was
    made with, as DuckLake reports it."""
    from flows.read.query import run_query
    from tests.postgres import PostgresMissing, start_server

    try:
        server = start_server()
    except PostgresMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        url = server.create_database("locked")
        shared = tmp_path / "shared"
        writer = Settings(warehouse=tmp_path / "w", catalog=url, data_path=str(shared))
        publish_table(writer, "create table t as select 42 as x")
        reader = Settings(warehouse=tmp_path / "elsewhere", catalog=url)
        assert run_query(reader, "select x from t").to_dicts() == [{"x": 42}]
        files = f"select count(*) as n from read_parquet('{shared}/main/t/*.parquet')"
        assert run_query(reader, files).to_dicts() == [{"n": 1}]
        with pytest.raises(QueryRefused, match=f"refused reading /etc/passwd: .* under {shared}/$"):
            run_query(reader, "select * from read_text('/etc/passwd')")
    finally:
        server.stop()


TYPES = (
    "select * from (values "
    "(interval 3 day, union_value(k := 1)::union(k int, s varchar), 'a\\xAAb'::blob, "
    "'101'::bit, 'infinity'::timestamp, '-infinity'::date, '-infinity'::timestamptz, "
    "['infinity'::date], 'infinity'::timestamp_s, 'infinity'::timestamp_ns, "
    "'12:00:00+01'::timetz), "
    "(interval '1 month 2 hours', union_value(s := 'x')::union(k int, s varchar), ''::blob, "
    "'0'::bit, '2026-01-02 03:04:05.25'::timestamp, '2026-01-02'::date, null, "
    "['2026-01-02'::date], '2026-01-02 03:04:05'::timestamp_s, null, null)"
    ") t(i, u, b, bt, ts, d, tz, dates, secs, nanos, tt)"
)  # fmt: skip
ROWS = [
    {"i": "3 days", "u": "1", "b": "a\\xAAb", "bt": "101", "ts": "infinity", "d": "-infinity",
     "tz": "-infinity", "dates": "[infinity]", "secs": "infinity", "nanos": "infinity",
     "tt": "12:00:00+01"},
    {"i": "1 month 02:00:00", "u": "x", "b": "", "bt": "0", "ts": "2026-01-02 03:04:05.250",
     "d": "2026-01-02", "tz": None, "dates": "[2026-01-02]", "secs": "2026-01-02 03:04:05",
     "nanos": None, "tt": None},
]  # fmt: skip


def test_every_value_type_prints_in_every_format(sample_run):
    def run(fmt: str) -> str:
        wh = sample_run.settings.warehouse
        result = invoke("query", TYPES, "-w", wh, "--format", fmt, env={"COLUMNS": "250"})
        assert result.exit_code == 0, result.output
        return result.stdout

    assert json.loads(run("json")) == ROWS
    assert [json.loads(line) for line in run("jsonl").splitlines()] == ROWS
    assert run("csv") == (
        "i,u,b,bt,ts,d,tz,dates,secs,nanos,tt\n"
        "3 days,1,a\\xAAb,101,infinity,-infinity,-infinity,[infinity],infinity,infinity,"
        "12:00:00+01\n"
        '1 month 02:00:00,x,"",0,2026-01-02 03:04:05.250,2026-01-02,,[2026-01-02],'
        "2026-01-02 03:04:05,,\n"
    )
    assert run("markdown").splitlines()[2:] == [
        "| 3 days | 1 | a\\xAAb | 101 | infinity | -infinity | -infinity | [infinity] | "
        "infinity | infinity | 12:00:00+01 |",
        "| 1 month 02:00:00 | x |  | 0 | 2026-01-02 03:04:05.250 | 2026-01-02 |  | "
        "[2026-01-02] | 2026-01-02 03:04:05 |  |  |",
    ]
    table = run("table")
    for row in ROWS:
        shown = [v for v in row.values() if v]
        assert any(all(v in line for v in shown) for line in table.splitlines()), table


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_long_query_with_one_line(sample_run, signum):
    from flows.core.stopping import GRACE_SECONDS

    long = "select sum(i % 7) from range(1000000000000) t(i)"
    query = subprocess.Popen(
        [PAPERLAKE, "query", long, "-w", sample_run.settings.warehouse], cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        tasks = Path(f"/proc/{query.pid}/task")
        deadline = time.monotonic() + 60
        # Two threads: the stop watcher is up, so the command runs; then DuckDB's own.
        while len(list(tasks.glob("*"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # the catalog is attached and the query under way
        sent = time.monotonic()
        if signum == signal.SIGINT:
            os.killpg(query.pid, signum)  # as Ctrl-C in a terminal
        else:
            query.send_signal(signum)
        out, err = query.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if query.poll() is None:
            query.kill()
            query.wait()
    name = signal.Signals(signum).name
    print(f"{name}: stopped in {took:.2f} s")
    assert query.returncode == 128 + signum
    assert out == ""
    assert err == f"error: query stopped by {name}; nothing was changed: a query only reads\n"
    assert took < GRACE_SECONDS  # DuckDB stopped the query; no forced exit was needed
