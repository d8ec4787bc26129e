"""The paperlake command line on the sample warehouse."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from flows.cli import app
from tests.conftest import write

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


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
    assert [sorted(h) for h in hits] == [
        ["abstract", "paper_id", "score", "title", "venue", "year"]
    ] * 3
    assert hits[0]["score"] >= hits[1]["score"] >= hits[2]["score"]
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
