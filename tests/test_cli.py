"""The paperlake command line on the sample warehouse."""

from __future__ import annotations

import csv
import io
import json
import re
from importlib.metadata import version

import polars as pl
import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.cli.output import Format, print_frame
from flows.cli.run import flow_parameters, handed_parameters
from flows.core.settings import Settings, run_parameters
from flows.pipeline import settings_of
from tests.conftest import write

runner = CliRunner()


def invoke(*args, env=None):
    return runner.invoke(app, [str(a) for a in args], env=env)


def test_query_counts_papers(sample_run):
    result = invoke(
        "query", "select count(*) as n from papers", "-w", sample_run.settings.warehouse
    )
    assert result.exit_code == 0, result.output
    assert "38" in result.output


def test_query_formats(sample_run):
    wh = sample_run.settings.warehouse
    sql = "select venue, year, count(*) as n from papers group by all"
    assert (
        invoke("query", sql, "-w", wh, "--format", "csv").stdout == "venue,year,n\nICLR,2026,38\n"
    )
    rows = json.loads(invoke("query", sql, "-w", wh, "--format", "json").stdout)
    assert rows == [{"venue": "ICLR", "year": 2026, "n": 38}]
    links = invoke(
        "query",
        "select links from papers where len(links) > 0 order by paper_id limit 1",
        "-w",
        wh,
        "--format",
        "csv",
    ).stdout
    assert links.splitlines()[1].startswith('"[{""url"": ""https://')


def test_query_at_a_version_and_bad_sql(sample_run):
    wh = sample_run.settings.warehouse
    ok = invoke(
        "query", "select count(*) as n from papers", "-w", wh, "--version", 1, "--format", "csv"
    )
    assert ok.stdout == "n\n38\n"
    missing = invoke("query", "select 1", "-w", wh, "--version", 7)
    assert missing.exit_code == 1 and "version 7 is not a published version" in missing.output
    bad = invoke("query", "select nope from papers", "-w", wh)
    assert bad.exit_code == 1 and "query failed" in bad.output and "nope" in bad.output


def test_versions_lists_version_1(sample_run):
    rows = json.loads(
        invoke("versions", "-w", sample_run.settings.warehouse, "--format", "json").stdout
    )
    assert [r["version"] for r in rows] == [1]
    assert rows[0]["summary"].startswith("paperlake run ")


HIT_FIELDS = (
    "rank", "paper_id", "title", "authors", "venue", "year", "topic_id", "topic", "link",
    "code", "decision", "score", "bm25", "all_words", "good_match", "no_good_match", "abstract",
)  # fmt: skip


def test_search_json_hits(sample_run):
    result = invoke(
        "search",
        "diffusion language model decoding",
        "-k",
        3,
        "--format",
        "json",
        "-w",
        sample_run.settings.warehouse,
    )
    hits = json.loads(result.stdout)
    assert [list(h) for h in hits] == [list(HIT_FIELDS)] * 3
    assert [h["rank"] for h in hits] == [1, 2, 3]
    assert hits[0]["good_match"] is True and 0 < hits[0]["score"] <= 1
    assert any("Prophet" in h["abstract"] for h in hits)
    assert any("SparseD" in h["abstract"] for h in hits)


def test_missing_warehouse_is_a_clear_error(tmp_path):
    result = invoke("query", "select 1", "-w", tmp_path / "none")
    assert result.exit_code == 1
    assert "no warehouse at" in result.output and "paperlake run" in result.output


def test_validate_reports_raw_files_without_a_warehouse(tmp_path):
    abstract = " ".join(f"word{i}" for i in range(30))
    write(tmp_path / "raw" / "rows.csv", f'id,title,abstract\na,One,"{abstract}"\nb,Two,"  "\n')
    write(tmp_path / "raw" / "image.json", b"\x89PNG\r\n\x1a\n\x00\x00")
    result = invoke("validate", tmp_path / "raw", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = {r["path"].rsplit("/", 1)[-1]: r for r in json.loads(result.stdout)}
    assert {k: (r["seen"], r["accepted"], r["rejected"]) for k, r in rows.items()} == {
        "image.json": (0, 0, 0),
        "rows.csv": (2, 1, 1),
    }
    assert rows["rows.csv"]["rejected_by_rule"] == "empty_abstract: 1"
    assert "binary content" in rows["image.json"]["error"]
    table = invoke("validate", tmp_path / "raw")
    assert table.exit_code == 0
    assert "records seen: 2  accepted: 1  rejected: 1" in table.output
    assert "rejects 50% of its records" not in table.output  # 50% is not above the limit
    missing = invoke("validate", tmp_path / "nothing-here")
    assert missing.exit_code == 1
    assert "nothing-here does not exist" in " ".join(missing.output.split())


# A tiny frame for the printer: a long value, a NULL, numbers, a list.
TINY = pl.DataFrame(
    {
        "id": ["a", "b", "c"],
        "title": ["One", "A title longer than twenty", None],
        "n": [1, 22, 333],
        "tags": [["x"], [], None],
    }
)


def printed(capsys, frame, fmt=Format.table, **kwargs) -> str:
    capsys.readouterr()
    print_frame(frame, fmt, **kwargs)
    return capsys.readouterr().out


def test_table_uses_the_room_it_has(capsys):
    assert printed(capsys, TINY, width=80) == (
        "┌────────┬────────────────────────────┬───────┬──────────┐\n"
        "│ id     │ title                      │     n │ tags     │\n"
        "│ string │ string                     │ int64 │ string[] │\n"
        "├────────┼────────────────────────────┼───────┼──────────┤\n"
        '│ a      │ One                        │     1 │ ["x"]    │\n'
        "│ b      │ A title longer than twenty │    22 │ []       │\n"
        "│ c      │ NULL                       │   333 │ NULL     │\n"
        "└────────┴────────────────────────────┴───────┴──────────┘\n"
    )


def test_table_cuts_values_to_twenty_characters_when_short_of_room(capsys):
    # 1 + (6 + 20 + 5 + 8) + 4 * 3 = 52 characters: values cut at 20, as duckdb's CLI.
    assert printed(capsys, TINY, width=52).splitlines()[5] == (
        "│ b      │ A title longer than… │    22 │ []       │"
    )


def test_table_leaves_out_middle_columns_and_says_so(capsys):
    assert printed(capsys, TINY, width=40) == (
        "┌────────┬───┬──────────┐\n"
        "│ id     │ … │ tags     │\n"
        "│ string │   │ string[] │\n"
        "├────────┼───┼──────────┤\n"
        '│ a      │ … │ ["x"]    │\n'
        "│ b      │ … │ []       │\n"
        "│ c      │ … │ NULL     │\n"
        "└────────┴───┴──────────┘\n"
        "3 rows  4 columns (2 shown)\n"
    )
    narrow = printed(capsys, TINY, width=12).splitlines()
    assert narrow[:3] == ["┌──────┬───┐", "│ id   │ … │", "│ str… │   │"]
    assert narrow[-1] == "3 rows  4 columns (1 shown)"
    assert max(len(line) for line in narrow[:-1]) == 12  # the table; its footer runs on


def test_table_shows_first_and_last_rows_with_an_elision_line(capsys):
    frame = pl.DataFrame({"i": range(7), "s": ["x|y", "a\nb", "c", "d", "e", "f", "g"]})
    assert printed(capsys, frame, max_rows=4, width=40) == (
        "┌───────┬────────┐\n"
        "│     i │ s      │\n"
        "│ int64 │ string │\n"
        "├───────┼────────┤\n"
        "│     0 │ x|y    │\n"
        "│     1 │ a b    │\n"
        "│   ·   │   ·    │\n"
        "│     5 │ f      │\n"
        "│     6 │ g      │\n"
        "└───────┴────────┘\n"
        "7 rows (4 shown)\n"
    )
    odd = printed(capsys, frame.select("i"), max_rows=3, width=40).splitlines()
    assert [line[2:7].strip() for line in odd[4:7]] == ["0", "1", "·"]
    assert odd[7:] == ["│     6 │", "└───────┘", "7 rows (3 shown)"]
    assert len(printed(capsys, frame, max_rows=0, width=40).splitlines()) == 4 + 7 + 1
    assert printed(capsys, TINY.clear(), width=40).splitlines()[-1] == "0 rows"


def test_text_formats_print_every_row_unshortened(capsys):
    assert printed(capsys, TINY, Format.csv, max_rows=1) == (
        'id,title,n,tags\na,One,1,"[""x""]"\nb,A title longer than twenty,22,[]\nc,,333,\n'
    )
    assert json.loads(printed(capsys, TINY, Format.json, max_rows=1)) == [
        {"id": "a", "title": "One", "n": 1, "tags": ["x"]},
        {"id": "b", "title": "A title longer than twenty", "n": 22, "tags": []},
        {"id": "c", "title": None, "n": 333, "tags": None},
    ]
    assert printed(capsys, TINY, Format.jsonl, max_rows=1) == (
        '{"id": "a", "title": "One", "n": 1, "tags": ["x"]}\n'
        '{"id": "b", "title": "A title longer than twenty", "n": 22, "tags": []}\n'
        '{"id": "c", "title": null, "n": 333, "tags": null}\n'
    )
    pipes = pl.DataFrame({"s": ["x|y", "a\nb"]})
    assert printed(capsys, TINY, Format.markdown, max_rows=1) + printed(
        capsys, pipes, Format.markdown
    ) == (
        "| id | title | n | tags |\n"
        "|---|---|---:|---|\n"
        '| a | One | 1 | ["x"] |\n'
        "| b | A title longer than twenty | 22 | [] |\n"
        "| c |  | 333 |  |\n"
        "| s |\n"
        "|---|\n"
        "| x\\|y |\n"
        "| a<br>b |\n"
    )


def test_version_flag_prints_the_package_version():
    result = invoke("--version")
    assert (result.exit_code, result.output) == (0, f"paperlake {version('paperlake')}\n")


def test_run_takes_every_setting_as_an_option():
    help_page = invoke("run", "--help", env={"COLUMNS": "200"}).output
    shown = " ".join(help_page.replace("│", " ").split())  # help wrapped over lines, joined
    for parameter in run_parameters():
        assert "--" + parameter.name.replace("_", "-") in shown
        assert parameter.help in shown
    assert "--topics" in shown and "-r " in shown and "-w " in shown


def test_run_passes_the_settings_given_to_the_flow():
    settings = Settings(warehouse="w", batch_size=8, raw=("a", "b"), max_reject_share=0.2)
    assert flow_parameters(settings) == {
        "warehouse": "w",
        "raw": ["a", "b"],
        "batch_size": 8,
        "max_reject_share": 0.2,
    }
    assert flow_parameters(Settings(warehouse="w")) == {"warehouse": "w"}


def test_a_handed_over_run_carries_every_setting_with_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-model").mkdir()
    settings = Settings(warehouse="w", raw=("a",), model="my-model", batch_size=8)
    given = handed_parameters(settings, force=True)
    assert {k: given[k] for k in ("warehouse", "raw", "model", "batch_size", "force")} == {
        "warehouse": str(tmp_path / "w"),
        "raw": [str(tmp_path / "a")],
        "model": str(tmp_path / "my-model"),
        "batch_size": 8,
        "force": True,
    }
    # Every setting goes, defaults included: the serving process has its own environment.
    assert set(given) == {p.name for p in run_parameters()} | {"force"}
    assert settings_of(given) == settings.with_(
        warehouse=tmp_path / "w", raw=(tmp_path / "a",), model=str(tmp_path / "my-model")
    )


def test_bad_arguments_end_with_a_message_not_a_traceback(sample_run, tmp_path):
    wh = sample_run.settings.warehouse
    walk = [
        (["--nope"], 2, "No such option"),
        (["query"], 1, "give the SQL as an argument or with --file"),
        (["query", "select 1", "--format", "xml", "-w", wh], 2, "'xml' is not one of"),
        (["query", "select 1", "--max-rows", "-1", "-w", wh], 2, "--max-rows"),
        (["query", "select [1", "-w", wh], 1, "the query does not parse: Parser Error"),
        (["query", "--file", tmp_path / "none.sql", "-w", wh], 1, "no SQL file"),
        (["query", "select 1", "-v", "1", "-w", wh], 2, "No such option: -v"),
        (["query", "select 1", "--version", "x", "-w", wh], 2, "Invalid value for '--version'"),
        (["versions", "-w", tmp_path / "none"], 1, "no warehouse at"),
        (["compact", "-w", tmp_path / "none"], 1, "no warehouse at"),
        (["diff", "1", "-w", wh], 2, "Missing argument"),
        (["diff", "1", "9", "--format", "csv", "-w", wh], 1, "version 9 is not a published"),
        (["checksum", "--version", "9", "-w", wh], 1, "version 9 is not a published"),
        (["similar", "nope", "-w", wh], 1, "no paper nope"),
        (["search", "x", "-k", "0", "-w", wh], 2, "-k"),
        (["report", "-w", wh, "-o", tmp_path / "file" / "x.html"], 1, "cannot write"),
        (["run", "--precision", "fp8", "-w", wh], 2, "'fp8' is not one of"),
        (["run", "--duplicate-threshold", "2", "-w", wh], 1, "duplicate_threshold must be"),
        (["run", "--batch-size", "many"], 2, "Invalid value for '--batch-size'"),
        (["run", "--raw", tmp_path / "none", "-w", wh], 1, "does not exist"),
        (["serve", "--cron", "0 6 * * *", "--interval", "9", "-w", wh], 1, "not both"),
        (["validate"], 2, "Missing argument"),
        (["query", "", "-w", wh], 1, "the query is empty"),
        (["search", "x", "-k", "-5", "-w", wh], 2, "-k"),
        (["similar", "x", "-k", "-5", "-w", wh], 2, "-k"),
        (["run", "-w", tmp_path / "file"], 1, "is a file: give a folder"),
        (["run", "--data-path", tmp_path / "file", "-w", wh], 1, "is a file: give a folder"),
        (["run", "--cluster", "dask", "-w", wh], 1, "cluster 'dask' must be local:N"),
        (["versions", "--catalog", "mysql://x/y", "-w", wh], 1, "is not supported"),
        (["versions", "-w", tmp_path / "file"], 1, "no warehouse at"),
    ]
    write(tmp_path / "file", "a file, not a folder")
    for args, code, message in walk:
        result = invoke(*args)
        said = " ".join(result.output.split())
        assert result.exit_code == code, (args, said)
        assert isinstance(result.exception, SystemExit), (args, result.exception)
        assert message in said and "Traceback" not in said, (args, said)


def test_a_long_result_fits_the_terminal(sample_run):
    wide = invoke(
        "query",
        "select p.*, r.range from papers p, range(100) r",
        "-w",
        sample_run.settings.warehouse,
        env={"COLUMNS": "100"},
    )
    lines = wide.stdout.splitlines()
    assert len(lines) == 4 + 20 + 1 + 20 + 1 + 1
    assert max(map(len, lines)) <= 100
    assert re.fullmatch(r"3,800 rows \(40 shown\)  \d+ columns \(\d+ shown\)", lines[-1])
    assert lines[24].strip("│ ·") == ""  # the elision line


def first_paper(warehouse) -> str:
    return invoke(
        "query", "select min(paper_id) from papers", "-w", warehouse, "--format", "csv"
    ).stdout.split()[1]


@pytest.mark.parametrize("fmt", [f.value for f in Format])
def test_every_row_command_takes_every_format(sample_run, tmp_path, fmt):
    wh = sample_run.settings.warehouse
    write(tmp_path / "raw" / "one.txt", "ICLR 2026 Papers\n\n" + " ".join(["word"] * 30) + "\n")
    commands = [
        ["query", "select venue, count(*) as n from papers group by all", "-w", wh],
        ["search", "diffusion language model decoding", "-k", 2, "-w", wh],
        ["similar", first_paper(wh), "-k", 2, "-w", wh],
        ["versions", "-w", wh],
        ["diff", 1, 1, "-w", wh],
        ["checksum", "-w", wh],
        ["validate", tmp_path / "raw"],
    ]
    for args in commands:
        result = invoke(*args, "--format", fmt, "--max-rows", 1, env={"COLUMNS": "100"})
        assert result.exit_code == 0, (args, result.output)
        text = result.stdout
        if fmt == "table":
            assert "┌" in text and max(map(len, text.splitlines())) <= 100, args
        elif fmt == "json":
            assert json.loads(text), args
        elif fmt == "jsonl":
            assert all(json.loads(line) for line in text.splitlines()), args
        elif fmt == "csv":
            rows = list(csv.reader(io.StringIO(text)))
            assert len(rows) > 1 and {len(r) for r in rows} == {len(rows[0])}, args
        else:
            assert re.search(r"^\|---", text, re.MULTILINE), args


def test_diff_as_csv_is_one_table_naming_each_row_s_list(sample_run):
    result = invoke("diff", 1, 1, "-w", sample_run.settings.warehouse, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(rows[0])[:17] == [
        "list",
        "change",
        "old_id",
        "new_id",
        "title",
        "untitled",
        "paper_id",
        "field",
        "old",
        "new",
        "source_path",
        "record_no",
        "dimension",
        "group",
        "papers_a",
        "papers_b",
        "delta",
    ]
    venue = [r for r in rows if r["dimension"] == "venue"]
    assert [(r["list"], r["group"], r["papers_a"], r["delta"]) for r in venue] == [
        ("groups", "ICLR 2026", "38", "0")
    ]
    assert {r["list"] for r in rows} == {"groups"}


def test_search_at_80_columns_shows_rank_title_score_venue_and_year_first(sample_run):
    """Hits are printed in order of importance: a narrow terminal (or a pipe at COLUMNS=80)
    drops ids and links, never the score, venue or year."""
    result = invoke(
        "search", "diffusion language model decoding", "-k", "3", "-w",
        sample_run.settings.warehouse, env={"COLUMNS": "80"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = [cell.strip() for cell in lines[1].strip("│").split("│")]
    assert header == ["rank", "title", "score", "venue", "year", "…"]
    assert max(map(len, lines[:-1])) <= 80
    assert lines[-1] == "3 rows  10 columns (5 shown)"
    assert all("ICLR" in line and "2026" in line for line in lines[4:7])


def test_a_table_by_importance_keeps_its_first_columns(capsys):
    narrow = printed(capsys, TINY, width=40, by_importance=True).splitlines()
    assert [c.strip() for c in narrow[1].strip("│").split("│")] == ["id", "title", "…"]


def test_a_daily_schedule_names_the_dates_of_its_next_runs():
    from flows.cli.run import schedule_text

    text = schedule_text("0 6 * * *", None)
    dates = re.findall(r"(\d{4}-\d{2}-\d{2}) 06:00:00", text)
    assert text.startswith("cron '0 6 * * *'; next runs at about ") and text.endswith(" UTC")
    assert len(dates) == 3 and len(set(dates)) == 3
    assert schedule_text(None, None) == "no schedule: runs from the UI and from paperlake run"
