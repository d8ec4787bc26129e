"""Data quality in words a person acts on: headlines of failed checks, rejected records
listed (on the page and by `paperlake validate`), and the pages a run names."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from flows.cli import app, print_summary
from flows.core.lake import connect
from flows.core.wording import location, snippet
from flows.validate import DataQualityError, headlines
from flows.validate import page as dq
from flows.validate.page.rejects import reject_groups
from tests.conftest import write

runner = CliRunner()


def failed(suite: str, expectation: str, column: str | None, count: int | None, **kwargs):
    """A failed dq_results row."""
    spec = ({"column": column} if column else {}) | kwargs
    return {
        "suite": suite, "expectation": expectation, "column_name": column,
        "kwargs": json.dumps(spec), "unexpected_count": count, "element_count": 40,
        "observed_value": None, "blocking": False, "success": False,
        "unexpected_ids": ["00000000000000aa"],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("row", "words"),
    [
        (
            failed("papers", "expect_column_values_to_be_between", "word_count", 4, min_value=20),
            "papers: 4 papers have fewer words than 20 (word_count)",
        ),
        (
            failed("papers", "expect_column_values_to_not_be_null", "venue", 1),
            "papers: 1 paper has no venue",
        ),
        (
            failed(
                "papers",
                "expect_column_values_to_be_between",
                "flag_count",
                3,
                min_value=0,
                max_value=0,
            ),
            "papers: 3 papers have flags (flag_count)",
        ),  # fmt: skip
        (
            failed(
                "papers",
                "expect_column_values_to_be_between",
                "year",
                2,
                min_value=1900,
                max_value=2100,
            ),
            "papers: 2 papers have a year outside 1900 to 2100",
        ),  # fmt: skip
        (
            failed(
                "papers",
                "expect_column_values_to_be_between",
                "unresolved_macro_count",
                5,
                min_value=0,
                max_value=0,
                mostly=0.9,
            ),
            "papers: 5 papers have unresolved TeX macros (unresolved_macro_count), more than "
            "the 10% allowed",
        ),  # fmt: skip
        (
            failed(
                "papers", "expect_column_value_lengths_to_be_between", "abstract", 1, min_value=1
            ),
            "papers: 1 paper has an empty abstract",
        ),  # fmt: skip
        (
            failed(
                "sources",
                "expect_column_values_to_be_between",
                "reject_share",
                1,
                min_value=0,
                max_value=0.5,
            ),
            "sources: 1 file has a reject_share above 0.5 (50%)",
        ),  # fmt: skip
        (
            failed(
                "neighbors",
                "expect_column_values_to_be_keys_of_table",
                "neighbor_id",
                3,
                table="papers",
                key="paper_id",
            ),
            "neighbors: 3 neighbor_id values name no paper",
        ),  # fmt: skip
        (
            failed(
                "sources",
                "expect_column_pair_values_to_be_equal",
                None,
                1,
                column_A="records_seen",
                column_B="accounted",
            ),
            "sources: 1 file has records_seen ≠ accounted",
        ),  # fmt: skip
        (
            failed("papers", "expect_table_row_count_to_equal", None, None, value=38)
            | {"observed_value": "41"},
            "papers: 41 rows where 38 were expected",
        ),
    ],
)
def test_a_failed_check_reads_as_words_without_ids(row, words):
    assert headlines.headline(row) == words


def test_a_reference_between_tables_is_worded_as_what_it_requires():
    kwargs = {"column": "neighbor_id", "table": "papers", "key": "paper_id"}
    assert dq.threshold("expect_column_values_to_be_keys_of_table", kwargs, "neighbors") == (
        "every neighbor_id of neighbors is a paper"
    )


def test_the_message_of_a_stopped_run_lists_blocking_failures_first_in_words():
    import polars as pl

    from flows.validate import outcome

    rows = [
        failed("papers", "expect_column_values_to_not_be_null", "venue", 2),
        failed("embeddings", "expect_column_values_to_be_between", "norm", 1,
               min_value=0.999, max_value=1.001) | {"blocking": True},
    ]  # fmt: skip
    results = pl.DataFrame(rows)
    told = outcome(results)
    assert (told.text, told.failures, told.warnings) == (
        "failed",
        ("embeddings: 1 embedding has a norm outside 0.999 to 1.001",),
        ("papers: 2 papers have no venue",),
    )
    with pytest.raises(DataQualityError, match=r"^blocking data-quality checks failed:\n  emb"):
        raise DataQualityError(results.filter("blocking"))


def rejects_table():
    """Six rejects of two files and three rules, out of record order."""
    con = connect(extensions=())
    long = "x  y\n" + "z" * 200
    con.execute(
        """
        create table rejects as select * from (values
            ('/raw/a.csv', 5, 6, 'too_short', 'abstract of 3 words, fewer than 20', 'p5,a b c'),
            ('/raw/a.csv', 2, 3, 'too_short', 'abstract of 2 words, fewer than 20', 'p2,Tiny,a b'),
            ('/raw/a.csv', 9, 10, 'too_short', 'abstract of 1 word, fewer than 20', 'p9,One,a'),
            ('/raw/a.csv', 1, 2, 'empty_abstract', 'abstract is empty or whitespace only', ?),
            ('/raw/sub/b.jsonl', 4, 4, 'invalid_json', 'invalid JSON', '{"title": "Cut'),
            ('/raw/sub/b.jsonl', 7, null, 'invalid_json', 'invalid JSON', '{"title"')
        ) t(source_path, record_no, line, rule, reason, raw_snippet)
        """,
        [long],
    )  # fmt: skip
    return con, long


def test_rejects_are_listed_by_file_then_rule_with_a_cap():
    con, long = rejects_table()
    groups, total = reject_groups(con, "/raw", shown=4, per_rule=2)
    assert total == 6
    listed = [
        (g.file, g.rule, g.count, g.more, [(r.location, r.reason, r.snippet) for r in g.records])
        for g in groups
    ]
    assert listed == [
        ("a.csv", "empty_abstract", 1, 0, [
            ("a.csv:2", "abstract is empty or whitespace only", "x y " + "z" * 76 + "…"),
        ]),
        ("a.csv", "too_short", 3, 1, [
            ("a.csv:3", "abstract of 2 words, fewer than 20", "p2,Tiny,a b"),
            ("a.csv:6", "abstract of 3 words, fewer than 20", "p5,a b c"),
        ]),
        # The fourth listed; the other is left to the query.
        ("sub/b.jsonl", "invalid_json", 2, 1, [
            ("sub/b.jsonl:4", "invalid JSON", '{"title": "Cut'),
        ]),
    ]  # fmt: skip
    every, _ = reject_groups(con, "/raw")
    assert [r.location for g in every for r in g.records][-1] == "sub/b.jsonl record 7"
    assert reject_groups(connect(extensions=()), "/raw") == ([], 0)  # no rejects table
    assert snippet("a\n\tb") == "a b" and location(None, "", None) == "?"


def test_a_page_names_the_query_that_lists_every_reject():
    page = dq.Page("r", 3, "", "passed", [("data quality", "passed")], [], [], "", [],
                   warehouse="/w")  # fmt: skip
    assert page.rejects_query == (
        'paperlake query "select source_path, line, rule, reason, raw_snippet from rejects '
        'order by source_path, rule, record_no" -w /w --version 3'
    )


def test_validate_lists_rejected_records_after_its_summary(tmp_path):
    abstract = " ".join(f"word{i}" for i in range(30))
    write(
        tmp_path / "raw" / "rows.csv",
        f'id,title,abstract\na,One,"{abstract}"\nb,Two,"  "\nc,,too few words here\n',
    )
    write(tmp_path / "raw" / "sub" / "dump.jsonl", '{"title": "Cut off", "abstract": "Half\n')
    result = runner.invoke(app, ["validate", str(tmp_path / "raw")], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    at = lines.index(f"rejected records (paths relative to {tmp_path / 'raw'})")
    summary = "files: 2  records seen: 4  accepted: 1  rejected: 3"
    assert summary in lines[:at]
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in lines[at + 5 : at + 8]]
    assert [row[:2] for row in rows] == [
        ["rows.csv:3", "empty_abstract"],
        ["rows.csv:4", "too_short"],
        ["sub/dump.jsonl:1", "invalid_json"],
    ]
    # On one line: white space runs as one space.
    assert rows[0][2:] == ["abstract is empty or whitespace only", 'b,Two," "']
    assert rows[1][3] == "c,,too few words here"


def test_a_run_prints_its_offline_page_first_and_the_data_docs_as_needing_a_network(capsys):
    summary = SimpleNamespace(
        status="published", version=2, warehouse="wh", run_id="0123456789", flow_run="fr",
        flow_run_url=None, files=1, records_seen=3, accepted=2, rejected=1,
        rejects_by_rule={"too_short": 1}, papers=2, duplicate_records=0,
        near_duplicate_pairs=0, topics=1, embedded=2, embeddings_reused=0, files_parsed=1,
        dq_outcome="passed with warnings", dq_failures=[],
        dq_warnings=["papers: 1 paper has no venue"], stage_seconds={"ingest": 0.1},
        file_errors=[], file_warnings=[], data_docs="wh/gx/index.html",
        dq_page="wh/dq-v2.html",
    )  # fmt: skip
    print_summary(summary)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-3:] == [
        "data-quality warning: papers: 1 paper has no venue",
        "data-quality page: wh/dq-v2.html",
        "Data Docs (Great Expectations; their styles load from a CDN, so they need a "
        "network): wh/gx/index.html",
    ]


def test_the_peak_memory_line_words_each_stage_in_gb():
    from flows.core.wording import peak_line

    peaks = {"startup": 512, "ingest": 1536}
    assert peak_line(peaks) == "peak memory GB: startup 0.50  ingest 1.50"
    # A summary from a warm runner that kept no peaks (started before they were kept).
    assert peak_line(None) == "peak memory GB: not measured"


def test_the_usage_lines_give_peaks_and_cpu_seconds_a_stage():
    from types import SimpleNamespace

    from flows.core.wording import usage_lines

    summary = SimpleNamespace(stage_peak_mb={"ingest": 1024}, stage_cpu_s={"ingest": 2.25})
    assert usage_lines(summary) == ["peak memory GB: ingest 1.00", "cpu seconds: ingest 2.2"]
    # A handed-over run's summary, from a runner that kept neither.
    assert usage_lines(SimpleNamespace())[1] == "cpu seconds: not measured"
