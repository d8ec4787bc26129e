"""The Python API (`import paperlake`), `paperlake export`, the plain-DuckDB recipe
(`paperlake duckdb`), and settings that stick: the warehouse's own paperlake.toml, serve's
options, and the model a version recorded."""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import duckdb
import paperlake
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from typer.main import get_command
from typer.testing import CliRunner

from flows.cli import app
from flows.cli.run import flow_parameters, handed_parameters, served_parameters
from flows.core.errors import WarehouseError
from flows.core.lake import attach, connect, open_lake
from flows.core.settings import PACKAGED_MODEL, PROJECT_ROOT, Settings, SettingsError
from flows.publish import refuse_model_switch
from flows.read.search import query_model, recorded_model
from tests.conftest import SAMPLE_RAW, write

runner = CliRunner()
SPECULATIVE = "7ce79da9c601ae8d"  # the sample paper on multi-draft speculative sampling
QUERY = "optimal transport for multi-draft speculative sampling"
DOC = PROJECT_ROOT / "docs" / "python-api.md"


def invoke(*args, env=None):
    return runner.invoke(app, [str(a) for a in args], env=env)


def said(result) -> str:
    return " ".join(result.output.split())


def copy_warehouse(source: Path, target: Path) -> Path:
    """The catalog, data files and caches of warehouse `source` at `target`."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".lock", "prefect", "gx", "dq*"))
    return target


def commit_version(warehouse: Path, *statements: str) -> None:
    """A new version of `warehouse` made by `statements`, committed as a run's are."""
    con = connect(extensions=())
    try:
        attach(con, Settings(warehouse=warehouse))
        con.execute("begin")
        for statement in statements:
            con.execute(statement)
        con.execute("call lake.set_commit_message('paperlake', 'test: a version by hand')")
        con.execute("commit")
    finally:
        con.close()


@pytest.fixture(scope="module")
def two_versions(sample_run, tmp_path_factory) -> Path:
    """The sample warehouse with a version 2 that lacks the speculative-sampling paper."""
    warehouse = copy_warehouse(
        sample_run.settings.warehouse, tmp_path_factory.mktemp("api") / "warehouse"
    )
    commit_version(
        warehouse,
        f"delete from papers where paper_id = '{SPECULATIVE}'",
        f"delete from embeddings where paper_id = '{SPECULATIVE}'",
    )
    return warehouse


def test_import_paperlake_and_count_the_sample_papers(sample_run, tmp_path):
    (tmp_path / "warehouse").symlink_to(sample_run.settings.warehouse)
    (tmp_path / "tmp").mkdir()
    line = "import paperlake; print(paperlake.open('warehouse').sql('select count(*) from papers')"
    shown = subprocess.run(
        [sys.executable, "-c", line + ".fetchone())"],
        cwd=tmp_path,
        env=os.environ | {"TMPDIR": str(tmp_path / "tmp")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout == "(38,)\n"
    assert list((tmp_path / "tmp").iterdir()) == []  # its copy of the catalog went with it


def test_a_lake_reads_each_version_s_tables_and_sql(two_versions, tmp_path):
    with paperlake.open(two_versions) as lake:
        assert (lake.version, lake.versions()["version"].to_list()) == (2, [1, 2])
        assert repr(lake) == f"<paperlake.Lake {two_versions} at version 2>"
        assert {"papers", "embeddings", "embedding_vectors", "runs"} <= set(lake.tables())
        assert lake.table("papers").height == 37
        assert lake.table("papers", version=1).height == 38
        assert lake.sql("select count(*) from papers").fetchone() == (37,)
        assert lake.sql("select count(*) from papers", version=1).fetchone() == (38,)
        found = lake.sql("select count(*) from papers where paper_id = $id", {"id": SPECULATIVE})
        assert found.fetchone() == (0,)
        papers = lake.table("papers", version=1)
        assert papers.schema["authors"] == pl.List(pl.String)
        assert papers.schema["links"] == pl.List(pl.Struct({"url": pl.String, "kind": pl.String}))
        assert lake.table("embedding_vectors").schema["embedding"] == pl.Array(pl.Float32, 384)
        with pytest.raises(WarehouseError, match=r"no table 'nope' in version 2 \(tables: "):
            lake.table("nope")
        with pytest.raises(WarehouseError, match=r"version 9 is not a published .*: 1, 2\)"):
            lake.table("papers", version=9)
        copy = Path(lake.copy.folder.name)
    assert lake.lakes == {} and not copy.exists()  # connections and copy gone with the block
    with paperlake.open(two_versions, version=1) as first:
        assert (first.version, first.table("papers").height) == (1, 38)
    with pytest.raises(WarehouseError, match="no warehouse at"):
        paperlake.open(tmp_path / "none")
    with pytest.raises(WarehouseError, match=r"version 3 is not a published version"):
        paperlake.open(two_versions, version=3)


def test_a_lake_searches_and_finds_similar_papers_per_version(two_versions):
    with paperlake.open(two_versions) as lake:
        then = lake.search(QUERY, k=1, version=1).row(0, named=True)
        assert (then["paper_id"], then["good_match"]) == (SPECULATIVE, True)
        assert SPECULATIVE not in lake.search(QUERY, k=5)["paper_id"].to_list()
        keyword = lake.search("speculative", k=3, mode="keyword", version=1)
        assert SPECULATIVE in keyword["paper_id"].to_list()
        near = lake.similar(SPECULATIVE, k=3, version=1)
        assert near.height == 3 and SPECULATIVE not in near["paper_id"].to_list()
        with pytest.raises(ValueError, match=f"no paper {SPECULATIVE} in this version"):
            lake.similar(SPECULATIVE)


def test_an_open_lake_lets_runs_publish_and_refreshes(two_versions, tmp_path):
    warehouse = copy_warehouse(two_versions, tmp_path / "warehouse")
    lake = paperlake.open(warehouse)
    pinned = paperlake.open(warehouse, version=2)
    copy = Path(lake.copy.folder.name)
    try:
        assert lake.refresh() is False  # nothing changed
        # The catalog itself is free: a writer gets DuckDB's lock at once.
        commit_version(warehouse, "delete from papers where paper_id = '000c86b34c2b1e54'")
        assert lake.version == 2 and lake.sql("select count(*) from papers").fetchone() == (37,)
        assert lake.refresh() is True and pinned.refresh() is True
        assert lake.version == 3 and lake.sql("select count(*) from papers").fetchone() == (36,)
        assert pinned.version == 2 and pinned.versions()["version"].to_list() == [1, 2, 3]
    finally:
        lake.close()
        pinned.close()
    assert not copy.exists()


def test_export_writes_parquet_that_polars_reads_with_its_lists_and_arrays(two_versions, tmp_path):
    target = tmp_path / "out" / "papers.parquet"
    result = invoke("export", "papers", "--to", target, "-w", two_versions)
    assert result.exit_code == 0, said(result)
    assert said(result) == f"37 rows of papers (version 2) written to {target} as parquet"
    with paperlake.open(two_versions) as lake:
        assert_frame_equal(pl.read_parquet(target), lake.table("papers"))
        embeddings = invoke(
            "export", "embeddings", "--to", tmp_path / "e.parquet", "-w", two_versions
        )
        assert embeddings.exit_code == 0, said(embeddings)
        vectors = pl.read_parquet(tmp_path / "e.parquet")
        assert vectors.schema["embedding"] == pl.Array(pl.Float32, 384)
        as_lists = vectors.with_columns(pl.col("embedding").arr.to_list())
        assert_frame_equal(as_lists, lake.table("embeddings"))
        written = lake.export("topics", tmp_path / "topics.parquet", version=1)
        assert pl.read_parquet(written).schema["centroid"] == pl.Array(pl.Float32, 384)
        with pytest.raises(FileExistsError, match="exists already .force replaces it"):
            lake.export("topics", written)
    assert sorted(p.name for p in tmp_path.rglob("*")) == [
        "e.parquet",
        "out",
        "papers.parquet",
        "topics.parquet",
    ]


def test_export_writes_csv_with_json_lists_and_jsonl_with_arrays(two_versions, tmp_path):
    with paperlake.open(two_versions) as lake:
        papers, topics = lake.table("papers", version=1), lake.table("topics")
    result = invoke(
        "export", "papers", "--to", tmp_path / "p.csv", "--version", 1, "-w", two_versions
    )
    assert said(result).startswith("38 rows of papers (version 1)"), said(result)
    rows = pl.read_csv(tmp_path / "p.csv", infer_schema=False)
    assert rows["paper_id"].to_list() == papers["paper_id"].to_list()
    assert [json.loads(v) for v in rows["links"]] == papers["links"].to_list()
    invoke("export", "topics", "--to", tmp_path / "t.txt", "--format", "csv", "-w", two_versions)
    terms = pl.read_csv(tmp_path / "t.txt", infer_schema=False)["top_terms"]
    assert [json.loads(v) for v in terms] == topics["top_terms"].to_list()
    invoke("export", "papers", "--to", tmp_path / "p.jsonl", "--version", 1, "-w", two_versions)
    lines = (tmp_path / "p.jsonl").read_text().splitlines()
    assert len(lines) == 38
    first = json.loads(lines[0])
    assert first["paper_id"] == papers["paper_id"][0]
    assert first["links"] == papers["links"].to_list()[0] and isinstance(first["authors"], list)


def test_export_refuses_a_file_that_is_there_and_a_table_that_is_not(two_versions, tmp_path):
    target = write(tmp_path / "p.parquet", "mine")
    kept = invoke("export", "papers", "--to", target, "-w", two_versions)
    assert (kept.exit_code, said(kept)) == (
        1,
        f"error: {target} exists already: pass --force to replace it",
    )
    assert target.read_text() == "mine"
    replaced = invoke("export", "papers", "--to", target, "--force", "-w", two_versions)
    assert replaced.exit_code == 0 and pl.read_parquet(target).height == 37
    unknown = invoke("export", "nope", "--to", tmp_path / "x.csv", "-w", two_versions)
    assert unknown.exit_code == 1
    assert said(unknown).startswith("error: no table 'nope' in version 2 (tables: authors, ")
    folder = invoke("export", "papers", "--to", tmp_path, "--force", "-w", two_versions)
    assert said(folder) == f"error: {tmp_path} is a folder: give a file's path"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.parquet"]


def run_offline(args: list, cwd: Path, **options) -> subprocess.CompletedProcess:
    """`args` with an empty home folder (no ~/.duckdb) and proxies that lead nowhere."""
    home = cwd / "home"
    home.mkdir(exist_ok=True)
    nowhere = "http://127.0.0.1:9"
    env = os.environ | {"HOME": str(home), "http_proxy": nowhere, "https_proxy": nowhere}
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, **options
    )


def test_the_plain_duckdb_recipe_runs_in_an_empty_home(sample_run, tmp_path):
    warehouse = sample_run.settings.warehouse
    paperlake_cli = Path(sys.executable).parent / "paperlake"
    printed = run_offline([paperlake_cli, "duckdb", "--print-setup", "-w", warehouse], tmp_path)
    assert printed.returncode == 0, printed.stderr
    (tmp_path / "lake.sql").write_text(printed.stdout)
    lines = printed.stdout.splitlines()
    assert (
        lines[0] == f"-- paperlake: the latest version of {warehouse}/catalog.ducklake, read-only"
    )
    assert [re.sub(r"'.*/", "'", line) for line in lines[1:4]] == [
        "LOAD 'ducklake.duckdb_extension';",
        "LOAD 'fts.duckdb_extension';",
        "LOAD 'vss.duckdb_extension';",
    ]
    assert lines[4].endswith("READ_ONLY);") and lines[5] == "USE lake;"
    recipe = (
        "import duckdb\ncon = duckdb.connect()\ncon.execute(open('lake.sql').read())\n"
        "print(con.sql('select count(*) from papers').fetchone())\n"
    )
    shutil.rmtree(tmp_path / "home")  # paperlake's own commands install the extensions there
    ran = run_offline([sys.executable, "-c", recipe], tmp_path)
    assert (ran.returncode, ran.stdout) == (0, "(38,)\n"), ran.stderr
    assert list((tmp_path / "home").iterdir()) == []  # nothing installed, nothing downloaded


def test_paperlake_duckdb_opens_the_duckdb_shell_on_a_copy(sample_run, tmp_path):
    pytest.importorskip("duckdb_cli", reason="the duckdb-cli package (pyproject) is missing")
    warehouse = sample_run.settings.warehouse
    paperlake_cli = Path(sys.executable).parent / "paperlake"
    one = run_offline(
        [paperlake_cli, "duckdb", "-w", warehouse, "-c", "select count(*) n from papers"], tmp_path
    )
    assert one.returncode == 0 and "│    38 │" in one.stdout, one.stderr
    (tmp_path / "lake.sql").write_text(duckdb_setup_text(warehouse))
    shell = [
        sys.executable,
        "-m",
        "duckdb_cli",
        "-init",
        "lake.sql",
        "-c",
        "select count(*) from topics",
    ]
    assert "│            4 │" in run_offline(shell, tmp_path).stdout
    piped = subprocess.Popen(
        [paperlake_cli, "duckdb", "-w", warehouse],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        piped.stdin.write("select 40 + 2 as answer;\n")
        piped.stdin.flush()
        assert "42" in "".join(next(piped.stdout) for _ in range(6))
        # While the shell is open, the catalog itself is free for a run's commit.
        duckdb.connect(str(warehouse / "catalog.ducklake")).close()
    finally:
        piped.stdin.close()
        assert piped.wait(timeout=30) == 0


def duckdb_setup_text(warehouse: Path) -> str:
    from flows.read import duckdb_setup

    return duckdb_setup(Settings(warehouse=warehouse))


def test_the_warehouse_s_own_settings_file_comes_after_the_working_folder_s(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("PAPERLAKE_WAREHOUSE", "PAPERLAKE_BATCH_SIZE"):
        monkeypatch.delenv(name, raising=False)
    write(tmp_path / "wh" / "paperlake.toml", 'batch_size = 4\nneighbors_k = 5\nmodel = "m"\n')
    (tmp_path / "m").mkdir()
    settings = Settings(warehouse="wh")
    assert (settings.batch_size, settings.neighbors_k) == (4, 5)
    assert settings.model == str(tmp_path / "m") and settings.model_given
    monkeypatch.setenv("PAPERLAKE_WAREHOUSE", "wh")
    assert Settings().batch_size == 4 and Settings(batch_size=8).batch_size == 8
    write(tmp_path / "paperlake.toml", "batch_size = 2\n")
    assert (Settings().batch_size, Settings().neighbors_k) == (2, 5)
    monkeypatch.setenv("PAPERLAKE_BATCH_SIZE", "3")
    assert Settings().batch_size == 3
    assert Settings(warehouse="elsewhere").neighbors_k == 10  # another warehouse's own
    write(tmp_path / "wh" / "paperlake.toml", "colour = 1\n")
    with pytest.raises(SettingsError, match=r"^wh/paperlake.toml: colour: not a setting$"):
        Settings()
    write(tmp_path / "wh" / "paperlake.toml", 'warehouse = "x"\n')
    with pytest.raises(SettingsError, match="warehouse: a warehouse's own file cannot move it"):
        Settings()


def test_a_model_is_spelled_once_and_given_or_not(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PAPERLAKE_MODEL", raising=False)
    (tmp_path / "mine").mkdir()
    assert Settings(model="mine").model == str(tmp_path / "mine")
    assert Settings(model="sentence-transformers/all-MiniLM-L6-v2").model == PACKAGED_MODEL
    assert Settings(model="org/not-here").model == "org/not-here"
    assert not Settings().model_given and Settings(model=PACKAGED_MODEL).model_given
    monkeypatch.setenv("PAPERLAKE_MODEL", PACKAGED_MODEL)
    assert Settings().model_given
    assert flow_parameters(Settings(warehouse="w"))["model"] == PACKAGED_MODEL
    monkeypatch.delenv("PAPERLAKE_MODEL")
    assert "model" not in flow_parameters(Settings(warehouse="w"))
    assert "model" not in handed_parameters(Settings(warehouse="w"), force=False)


def test_a_run_that_would_switch_models_unasked_stops(two_versions, tmp_path):
    refuse_model_switch(Settings(warehouse="w"), None)  # a new warehouse
    refuse_model_switch(Settings(warehouse="w"), PACKAGED_MODEL)
    refuse_model_switch(Settings(warehouse="w", model=PACKAGED_MODEL), "/models/specter")
    with pytest.raises(WarehouseError, match="w was embedded with the model /models/specter,"):
        refuse_model_switch(Settings(warehouse="w"), "/models/specter")
    warehouse = copy_warehouse(two_versions, tmp_path / "warehouse")
    commit_version(warehouse, """update runs set config = '{"model": "/models/specter"}'""")
    stopped = invoke("run", "--raw", SAMPLE_RAW, "-w", warehouse)
    assert (stopped.exit_code, said(stopped)) == (
        1,
        f"error: {warehouse} was embedded with the model /models/specter, and this run's is "
        f"the default {PACKAGED_MODEL}: pass --model /models/specter to keep it (or set model "
        f"in {warehouse}/paperlake.toml), or --model {PACKAGED_MODEL} to switch (every paper "
        "is embedded again)",
    )
    # Asked for by name, here or in the warehouse's own file, the run goes on: its inputs,
    # settings and weights are those of the sample's run (version 1), so it is up to date.
    switched = invoke("run", "--raw", SAMPLE_RAW, "-w", warehouse, "--model", PACKAGED_MODEL)
    assert said(switched).startswith("up to date at version 1"), said(switched)
    write(warehouse / "paperlake.toml", f'model = "{PACKAGED_MODEL}"\n')
    kept = invoke("run", "--raw", SAMPLE_RAW, "-w", warehouse)
    assert said(kept).startswith("up to date at version 1"), said(kept)


def test_search_embeds_queries_with_the_model_its_version_recorded(sample_run, tmp_path):
    with open_lake(sample_run.settings) as con:
        assert recorded_model(con) == PACKAGED_MODEL
    (tmp_path / "specter").mkdir()
    other = "specter"
    plain = Settings(warehouse="w")
    assert query_model(f"sentence-transformers/{PACKAGED_MODEL}", plain) == PACKAGED_MODEL
    assert query_model(other, plain, str(tmp_path / "specter")) == str(tmp_path / "specter")
    given = Settings(warehouse="w", model=str(tmp_path))
    assert query_model(other, given, str(tmp_path / "specter")) == str(tmp_path)
    with pytest.raises(ValueError, match="embedded with specter from /gone, which is not here;"):
        query_model(other, plain, "/gone")
    with pytest.raises(ValueError, match="embedded with specter; pass --model"):
        query_model(other, plain, None)


def test_serve_takes_every_option_run_takes(tmp_path, monkeypatch):
    commands = get_command(app).commands
    options = {name: {p.name for p in commands[name].params} for name in ("run", "serve")}
    assert options["run"] - {"force"} <= options["serve"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "raw").mkdir()
    (tmp_path / "m").mkdir()
    write(tmp_path / "wh" / "paperlake.toml", "neighbors_k = 5\n")
    settings = Settings(warehouse="wh", raw=("raw",), batch_size=8, model="m")
    assert served_parameters(settings) == {
        "raw": [str(tmp_path / "raw")],
        "warehouse": str(tmp_path / "wh"),
        "batch_size": 8,
        "model": str(tmp_path / "m"),
        "neighbors_k": 5,
    }


def checked_lines(block: str) -> list[tuple[int, str]]:
    """(line, value) of each top-level expression of a python block followed by a comment:
    the value the documentation says it gives."""
    comments = {
        token.start[0]: token.string.removeprefix("#").strip()
        for token in tokenize.generate_tokens(io.StringIO(block).readline)
        if token.type == tokenize.COMMENT
    }
    return [
        (node.end_lineno, comments[node.end_lineno])
        for node in ast.parse(block).body
        if isinstance(node, ast.Expr) and node.end_lineno in comments
    ]


def test_the_python_api_walk_through_runs_as_documented(sample_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PAPERLAKE_WAREHOUSE", raising=False)
    (tmp_path / "warehouse").symlink_to(sample_run.settings.warehouse)
    (tmp_path / "lake.sql").write_text(invoke("duckdb", "--print-setup").stdout)  # as documented
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 10
    namespace: dict = {}
    checked = 0
    for block in blocks:
        lines = block.splitlines()
        wanted = dict(checked_lines(block))
        for node in ast.parse(block).body:
            code = compile(ast.Module([node], []), str(DOC), "exec")
            if node.end_lineno not in wanted:
                exec(code, namespace)
                continue
            value = eval(compile(ast.Expression(node.value), str(DOC), "eval"), namespace)
            said_there = wanted[node.end_lineno]
            assert said_there == repr(value) or said_there.startswith(f"{value!r}: "), lines
            checked += 1
    assert checked == 18
    assert (tmp_path / "papers.parquet").is_file()
