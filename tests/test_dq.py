"""The data-quality page: words, a run with warnings in Chromium, the trend, the CLI."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

from flows import validate
from flows.cli import app, print_summary
from flows.core.lake import open_lake
from flows.core.settings import EXPECTATIONS_DIR, Settings
from flows.validate import page as dq
from tests.conftest import SAMPLE_RAW, open_offline, write

runner = CliRunner()
# Two titled records without venue or year: version 2 publishes them with warnings.
WARNED = [
    {
        "title": "Sparse Mixtures of Experts at Scale",
        "abstract": "Sparse mixtures of experts route each token to two of sixty-four "
        "feed-forward experts, and a load-balancing loss keeps every expert busy during "
        "pre-training at scale across thousands of accelerators.",
    },
    {
        "title": "Distilled Diffusion Policies for Fast Robot Control",
        "abstract": "Diffusion policies for robot manipulation are distilled into a "
        "single-step policy that keeps the success rate of the teacher while acting forty "
        "times faster on real hardware and in simulation.",
    },
]
# And two records version 2 rejects, of two rules (half the file: not above the limit).
REJECTED = '{"title": "Cut off", "abstract": "Half a rec\n{"title": "Blank", "abstract": "  "}\n'


@dataclass
class WarnedRun:
    settings: Settings
    raw: Path
    summary: object  # version 2's RunSummary


@pytest.fixture(scope="module")
def warned_run(sample_run, tmp_path_factory) -> WarnedRun:
    """Version 1 from data/raw, version 2 adding a file that names no venue or year."""
    from flows.pipeline import paperlake

    root = tmp_path_factory.mktemp("warned")
    raw, warehouse = root / "raw", root / "warehouse"
    shutil.copytree(SAMPLE_RAW, raw)
    # The sample run's vectors, so that only the two new abstracts are embedded.
    shutil.copytree(
        sample_run.settings.cache_path / "embeddings", warehouse / "cache" / "embeddings"
    )
    first = paperlake(raw=[str(raw)], warehouse=str(warehouse))
    assert (first.version, first.dq_outcome) == (1, "passed")
    write(raw / "misc" / "dump.jsonl", "".join(json.dumps(r) + "\n" for r in WARNED) + REJECTED)
    summary = paperlake(raw=[str(raw)], warehouse=str(warehouse))
    assert (summary.version, summary.dq_outcome) == (2, "passed with warnings")
    return WarnedRun(Settings(warehouse=warehouse, raw=(raw,)), raw, summary)


def cli_quality_lines(summary, capsys) -> list[str]:
    """The data-quality lines `paperlake run` prints for `summary`."""
    capsys.readouterr()
    print_summary(summary)
    printed = capsys.readouterr().out.splitlines()
    labels = ("data quality:", "data-quality warning:", "data-quality failure:")
    return [line for line in printed if line.startswith(labels)]


def test_thresholds_and_observations_in_words():
    between = {"column": "word_count", "min_value": 1.0, "max_value": 1500.0}
    assert dq.threshold("expect_column_values_to_be_between", between) == (
        "every value ≥ 1 and ≤ 1500"
    )
    assert dq.threshold(
        "expect_column_values_to_be_between",
        {"column": "unresolved_macro_count", "min_value": 0, "max_value": 0, "mostly": 0.9},
    ) == ("every value = 0, in at least 90% of rows")
    assert dq.threshold("expect_table_row_count_to_equal", {"value": 38}) == "exactly 38 rows"
    assert dq.threshold(
        "expect_column_pair_values_to_be_equal",
        {"column_A": "records_seen", "column_B": "accounted"},
    ) == ("records_seen = accounted in every row")
    check = {"expectation": "expect_column_values_to_not_be_null", "element_count": 40}
    assert dq.observed(check | {"unexpected_count": 2}, None) == "2 of 40 rows unexpected (5.0%)"
    assert dq.observed({"expectation": "expect_table_row_count_to_equal"}, 41) == "41 rows"
    # A threshold set by a parameter (the paper count) is the same expectation next version.
    assert dq.expectation_key("expect_table_row_count_to_equal", None, '{"value": 38}') == (
        dq.expectation_key("expect_table_row_count_to_equal", None, '{"value": 40}')
    )
    assert (
        dq.short_value("x" * 300 + r"\textbf{A}" + "y" * 300, r"\\textbf\{").count(r"\textbf{A}")
        == 1
    )


def test_the_run_writes_the_page_paperlake_dq_writes(warned_run):
    page = warned_run.settings.warehouse / "dq-v2.html"
    assert warned_run.summary.dq_page == str(page)
    written_by_run = page.read_text()
    result = runner.invoke(app, ["dq", "-w", str(warned_run.settings.warehouse)])
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == str(page)
    assert page.read_text() == written_by_run


def test_trend_shows_both_versions(warned_run):
    html = (warned_run.settings.warehouse / "dq-v2.html").read_text()
    trend = html[html.index('<section id="trend">') :]
    for suite in validate.suite_names():
        card = trend[trend.index(f'data-trend-suite="{suite}"') :].split("</svg>", 1)[0]
        assert re.findall(r'data-trend-version="(\w+)" data-status="([\w ]+)"', card) == [
            ("1", "passed"),
            ("2", "passed with warnings" if suite == "papers" else "passed"),
        ], suite


def test_cli_dq_json_gives_one_object_per_expectation_result(warned_run, capsys):
    warehouse = warned_run.settings.warehouse
    result = runner.invoke(app, ["dq", "-w", str(warehouse), "--format", "json"])
    assert result.exit_code == 0, result.output
    content = json.loads(result.stdout)
    with open_lake(warned_run.settings) as con:
        stored = con.execute(
            "select count(*) from dq_results join runs using (run_id) where runs.snapshot_id = 2"
        ).fetchone()[0]
    assert (content["version"], content["outcome"]) == (2, "passed with warnings")
    assert content["lines"] == cli_quality_lines(warned_run.summary, capsys)
    assert len(content["expectations"]) == stored
    venue = next(e for e in content["expectations"] if e["column"] == "venue" and not e["success"])
    assert (venue["severity"], venue["blocking"], venue["outcome"]) == (
        "warning",
        False,
        "failed: warning",
    )
    assert sorted((r["title"], r["location"], r["value"]) for r in venue["failing_rows"]) == [
        ("Distilled Diffusion Policies for Fast Robot Control", "misc/dump.jsonl:2", "null"),
        ("Sparse Mixtures of Experts at Scale", "misc/dump.jsonl:1", "null"),
    ]
    files = {f["file"]: f for f in content["files"]}
    assert files["misc/dump.jsonl"]["warning"].startswith("of 2 accepted records, 2 no venue")
    # The headlines in the run's words, each naming its papers by title.
    assert [(h["text"], sorted(r["title"] for r in h["rows"])) for h in content["headlines"]] == [
        ("papers: 2 papers have no venue", sorted(r["title"] for r in WARNED)),
        ("papers: 2 papers have no year", sorted(r["title"] for r in WARNED)),
    ]
    # Every rejected record, by file and then rule: where, why, its first characters.
    rejects = content["rejects"]
    assert (rejects["total"], rejects["listed"]) == (2, 2)
    listed = [
        (g["file"], g["rule"], g["count"], [(r["location"], r["snippet"]) for r in g["records"]])
        for g in rejects["groups"]
    ]
    assert listed == [
        ("misc/dump.jsonl", "empty_abstract", 1,
         [("misc/dump.jsonl:4", '{"title": "Blank", "abstract": " "}')]),
        ("misc/dump.jsonl", "invalid_json", 1,
         [("misc/dump.jsonl:3", '{"title": "Cut off", "abstract": "Half a rec')]),
    ]  # fmt: skip
    reasons = [g["records"][0]["reason"] for g in rejects["groups"]]
    assert reasons[0] == "abstract is empty or whitespace only"
    assert reasons[1].startswith("invalid JSON: ")

    first = runner.invoke(app, ["dq", "-w", str(warehouse), "--version", "1"])
    assert first.output.strip().splitlines()[-1] == str(warehouse / "dq-v1.html")
    assert "data quality:</span> passed</p>" in (warehouse / "dq-v1.html").read_text()
    assert "Every record of the raw files was accepted." in (warehouse / "dq-v1.html").read_text()
    missing = runner.invoke(app, ["dq", "-w", str(warehouse), "--version", "9"])
    assert missing.exit_code == 1 and "version 9 is not a published version" in missing.output


def test_papers_version_2_added_are_named_in_diff_and_report(warned_run, tmp_path):
    from flows.read import write_report

    warehouse = str(warned_run.settings.warehouse)
    titles = sorted(r["title"] for r in WARNED)
    listed = runner.invoke(app, ["diff", "1", "2", "-w", warehouse, "--format", "json"])
    papers = json.loads(listed.stdout)["papers"]
    assert sorted((p["change"], p["title"], p["untitled"]) for p in papers) == [
        ("added", title, False) for title in titles
    ]
    ids = {p["title"]: p["new_id"] for p in papers}
    shown = runner.invoke(app, ["diff", "1", "2", "-w", warehouse]).output
    for title in titles:
        assert f"│ added  │ {ids[title]} │ {title[:30]}" in shown, shown  # cut to fit 80

    html = write_report(warned_run.settings, 2, tmp_path / "report.html").read_text()
    changes = html[html.index('<section id="changes">') :].split("</section>", 1)[0]
    rows = re.findall(r'<tr data-change="(\w+)">(.*?)</tr>', changes, re.S)
    named = [
        (change, *re.search(r'title="(\w+)" data-paper-title>([^<]*)<', row).groups())
        for change, row in rows
    ]
    assert sorted(named) == sorted(("added", ids[title], title) for title in titles)


def test_page_of_a_stopped_run_names_the_blocking_failure(warned_run):
    """A run stopped by a blocking check gets its page from its staged tables and results
    (here version 2's, with one embedding made to fail)."""
    settings = warned_run.settings
    results = pl.DataFrame(
        json.loads((settings.dq_path / f"{warned_run.summary.run_id}.json").read_text()),
        schema=validate.DQ_SCHEMA,
    )
    con = duckdb.connect()
    with open_lake(settings) as lake:
        paper_id, path, line = lake.execute(
            "select paper_id, source_path, line from papers where title is null "
            "order by paper_id limit 1"
        ).fetchone()
        (model,) = lake.execute("select distinct model from embeddings").fetchone()
        for name in ("papers", "sources", "rejects", "embeddings"):
            con.register("frame", lake.table(name).pl())
            con.execute(f"create table {name} as select * from frame")
            con.unregister("frame")
    norm = pl.col("column_name") == "norm"
    results = results.with_columns(
        success=pl.when(norm).then(False).otherwise("success"),
        unexpected_count=pl.when(norm).then(1).otherwise("unexpected_count"),
        # Rows are named by the table's key: paper and model.
        unexpected_ids=pl.when(norm)
        .then(pl.lit([f"{paper_id}/{model}"]))
        .otherwise("unexpected_ids"),
    )
    page = dq.write_run_page(con, settings, "0badc0de-stopped", results)
    assert page == settings.dq_path / "0badc0de-stopped.html"
    html = page.read_text()
    assert "run 0badc0de (stopped before publish)" in html
    lines = [re.sub(r"<[^>]+>", "", m) for m in re.findall(r"<p data-line>(.*?)</p>", html)]
    assert lines[:2] == [
        "data quality: failed",
        "data-quality failure: embeddings: 1 embedding has a norm outside 0.999 to 1.001",
    ]
    # The headline names the paper it is about, by its first words (it has no title).
    named = re.search(rf'<li data-named-row="{paper_id}/{model}">(.*?)</li>', html, re.S)
    assert 'class="untitled"' in named.group(1) and f"{Path(path).name}:{line}<" in named.group(1)
    row = re.search(rf'data-key="{paper_id}/{model}">(.*?)</tr>', html, re.S).group(1)
    assert f"{Path(path).name}:{line}</td>" in row and 'class="untitled"' in row
    card = html[html.index('data-trend-suite="embeddings"') :].split("</svg>", 1)[0]
    assert re.findall(r'data-trend-version="(\w+)" data-status="([\w ]+)"', card) == [
        ("1", "passed"),
        ("2", "passed"),
        ("run", "failed"),
    ]


def test_dq_page_of_a_run_with_warnings_in_chromium(chromium, warned_run, capsys):
    opened = open_offline(chromium, Path(warned_run.summary.dq_page))
    page, errors, requests = opened.page, opened.errors, opened.requests

    shown = [t.strip() for t in page.locator("#outcome [data-line]").all_text_contents()]
    assert shown == cli_quality_lines(warned_run.summary, capsys)
    assert shown[0] == "data quality: passed with warnings"

    # Failures first: the suite with warnings, then those that passed (by name).
    listed = page.eval_on_selector_all(".suite[data-suite]", "els => els.map(e => e.dataset.suite)")
    passed = sorted(p.stem for p in EXPECTATIONS_DIR.glob("*.json") if p.stem != "papers")
    assert listed == ["papers", *passed]
    # Each warning names its papers by title beneath it, as the run words it.
    headline = page.locator("#outcome .headline").filter(has_text="2 papers have no venue")
    assert sorted(headline.locator("li").all_inner_texts()) == [
        "Distilled Diffusion Policies for Fast Robot Control misc/dump.jsonl:2",
        "Sparse Mixtures of Experts at Scale misc/dump.jsonl:1",
    ]
    rejects = page.locator("#rejects tr[data-reject]")
    assert [r.split("\t")[:2] for r in rejects.all_inner_texts()] == [
        ["misc/dump.jsonl:4", "empty_abstract"],
        ["misc/dump.jsonl:3", "invalid_json"],
    ]

    venue = page.locator(
        '#suite-papers [data-failing-row][data-expectation="expect_column_values_to_not_be_null"]'
        '[data-column="venue"]'
    )
    assert venue.count() == 2
    first = venue.filter(has_text="Sparse Mixtures of Experts at Scale")
    assert first.locator(".location").inner_text() == "misc/dump.jsonl:1"
    assert first.locator(".location").get_attribute("title") == str(
        warned_run.raw / "misc" / "dump.jsonl"
    )
    assert first.locator(".value").inner_text() == "null"
    assert first.locator(".pid").inner_text() == first.get_attribute("data-key")  # the id

    # Hiding passed checks leaves the two warnings and their rows.
    page.check("#hide-passed")
    assert page.locator("#suite-papers tr.check.passed").first.is_hidden()
    assert venue.first.is_visible()

    assert errors == []
    assert requests == []
    page.close()


def test_the_page_gathered_while_a_version_is_committed_is_the_page_of_that_version(warned_run):
    """A run gathers its version's page from its own tables beside the commit: the same
    page as one gathered from the catalog once the version is published, failing rows
    and the trend over both versions included."""
    from flows.validate.page.gather import tables_read
    from flows.validate.page.trend import history_rows

    settings = warned_run.settings
    with open_lake(settings, extensions=()) as lake:
        earlier = history_rows(lake, 1)
        tables = {name: lake.table(name).pl() for name in ("sources", "papers", "rejects")}
        tables["runs"] = lake.execute("select * from runs where snapshot_id = 2").pl()
        results = lake.execute(
            "select * from dq_results where run_id = ?", [warned_run.summary.run_id]
        ).pl()
    assert tables_read(results) == {"sources", "rejects", "papers"}  # and a warning's rows
    page = dq.build_page_while_publishing(tables, results, earlier, 2)
    assert dq.page_as_json(page) == dq.page_as_json(dq.build_page(settings, 2))
    assert [p.version for p in page.trend[0].points] == [1, 2]
