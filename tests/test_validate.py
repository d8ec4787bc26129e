"""Validate: the real Great Expectations suites from expectations/ on tiny frames."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from flows import validate
from flows.settings import EXPECTATIONS_DIR

PARAMS = {
    "min_words": 20,
    "max_words": 1500,
    "model_dim": 3,
    "papers": 2,
    "neighbors_k": 10,
    "duplicate_threshold": 0.95,
    "max_reject_share": 0.5,
}


def papers(**changes) -> pl.DataFrame:
    base = {
        "paper_id": ["00000000000000aa", "00000000000000bb"],
        "source_path": ["f.txt", "f.txt"],
        "venue": ["ICLR", "ICLR"],
        "year": [2026, 2026],
        "abstract": ["word " * 30, "other " * 40],
        "abstract_raw": ["word " * 30, "other " * 40],
        "word_count": [30, 40],
        "links": [[], []],
        "authors": [[], []],
        "keywords": [[], []],
        "unresolved_macros": [[], []],
    }
    base.update(changes)
    return pl.DataFrame(base)


@pytest.fixture(scope="module")
def validator(tmp_path_factory):
    return validate.Validator(tmp_path_factory.mktemp("gx"), run_id="test-run")


def test_every_table_suite_is_a_json_file_named_after_its_table():
    names = validate.suite_names()
    assert names == [
        "duplicate_groups",
        "duplicates",
        "embeddings",
        "mentions",
        "neighbors",
        "paper_topics",
        "papers",
        "rejects",
        "sources",
        "topics",
    ]
    for name in names:
        spec = json.loads((EXPECTATIONS_DIR / f"{name}.json").read_text())
        assert spec["name"] == name
        assert {e["severity"] for e in spec["expectations"]} <= {"critical", "warning"}


def test_clean_papers_pass(validator):
    results = validator.validate("papers", papers(), PARAMS)
    assert results["success"].all()
    assert validate.blocking_failures(results).height == 0
    assert set(results["suite"]) == {"papers"}
    assert results["run_id"].unique().to_list() == ["test-run"]


def test_duplicate_ids_block_and_missing_venue_warns_naming_rows(validator):
    frame = papers(paper_id=["00000000000000aa", "00000000000000aa"], venue=["ICLR", None])
    results = validator.validate("papers", frame, PARAMS)
    failures = validate.blocking_failures(results)
    failed = {(r["expectation"], r["column_name"]): r for r in failures.iter_rows(named=True)}
    assert set(failed) == {("expect_column_values_to_be_unique", "paper_id")}
    assert failed[("expect_column_values_to_be_unique", "paper_id")]["unexpected_count"] == 2
    warned = results.filter(~pl.col("success") & ~pl.col("blocking"))
    assert warned.select("expectation", "column_name", "unexpected_ids").rows() == [
        ("expect_column_values_to_not_be_null", "venue", ["00000000000000aa"])
    ]
    message = str(validate.DataQualityError(failures))
    assert "papers.expect_column_values_to_be_unique(paper_id): 2 unexpected" in message
    assert "in rows 00000000000000aa" in message


def test_only_checks_that_would_corrupt_the_warehouse_block():
    """Keys, references, embeddings, and invariants of derived tables block; whatever bad
    input can cause (missing metadata, implausible values, file errors) only warns."""
    blocking = {
        (name, e["type"], json.dumps(e["kwargs"], sort_keys=True))
        for name in validate.suite_names()
        for e in json.loads((EXPECTATIONS_DIR / f"{name}.json").read_text())["expectations"]
        if e["severity"] == "critical"
    }
    columns = {(name, json.loads(kwargs).get("column")) for name, _, kwargs in blocking}
    for input_dependent in ("venue", "year", "word_count", "error", "reject_share", "label"):
        assert not any(column == input_dependent for _, column in columns), input_dependent
    assert ("papers", "paper_id") in columns and ("embeddings", "norm") in columns


def test_word_count_bounds_come_from_parameters(validator):
    results = validator.validate("papers", papers(), {**PARAMS, "max_words": 35})
    warned = results.filter(~pl.col("success"))
    assert validate.blocking_failures(results).height == 0
    assert warned.select("column_name", "unexpected_count", "unexpected_ids").rows() == [
        ("word_count", 1, ["00000000000000bb"])
    ]


def test_embedding_checks_dimension_nan_and_norm(validator):
    frame = pl.DataFrame(
        {
            "paper_id": ["a", "b", "c"],
            "model": ["m"] * 3,
            "dim": [3, 3, 2],
            "embedding": pl.Series(
                [[1.0, 0.0, 0.0], [float("nan"), 0.0, 0.0], [0.5, 0.5]], dtype=pl.List(pl.Float32)
            ),
        }
    )
    failures = validate.blocking_failures(
        validator.validate("embeddings", frame, {**PARAMS, "papers": 3})
    )
    by_column = {r["column_name"]: r["unexpected_ids"] for r in failures.iter_rows(named=True)}
    # A NaN norm is missing to pandas, so the NaN check, not the norm check, names "b".
    # Rows are named by the table's key: paper and model.
    assert by_column == {"dim": ["c/m"], "nan_count": ["b/m"], "norm": ["c/m"]}


def test_sources_must_account_for_every_record(validator):
    frame = pl.DataFrame(
        {
            "path": ["a.txt", "b.txt"],
            "sha256": ["x", "y"],
            "records_seen": [3, 4],
            "accepted": [2, 3],
            "rejected": [1, 0],
            "error": [None, None],
        }
    )
    failures = validate.blocking_failures(validator.validate("sources", frame, PARAMS))
    assert failures.select("expectation", "unexpected_ids").rows() == [
        ("expect_column_pair_values_to_be_equal", ["b.txt"])
    ]


def test_data_docs_are_built(validator):
    index = validator.build_docs()
    assert index is not None and index.name == "index.html"
    assert "papers" in index.read_text()


def test_data_docs_name_the_run_and_table_and_carry_severity(validator):
    """Each stored result is named by the paperlake run and its table, each expectation
    carries its severity in its meta, and no pandas query names a frame readers lack."""
    validator.validate("papers", papers(venue=["ICLR", None]), PARAMS)
    runs = Path(validator.context.root_directory) / "uncommitted" / "validations" / "papers"
    stored = json.loads(sorted((runs / "test-run").glob("*/*.json"))[-1].read_text())
    assert stored["meta"]["run_id"]["run_name"] == "test-run"
    assert stored["meta"]["batch_spec"]["data_asset_name"] == "papers"
    meta = {
        (r["expectation_config"]["type"], r["expectation_config"]["kwargs"].get("column")): r[
            "expectation_config"
        ]["meta"]["paperlake"]
        for r in stored["results"]
    }
    assert meta[("expect_column_values_to_not_be_null", "venue")] == {
        "severity": "warning",
        "blocks_publish": False,
    }
    assert meta[("expect_column_values_to_be_unique", "paper_id")] == {
        "severity": "critical",
        "blocks_publish": True,
    }
    assert not any("unexpected_index_query" in r["result"] for r in stored["results"])
    index = validator.build_docs()
    page = max((index.parent / "validations" / "papers" / "test-run").glob("*/*.html"))
    text = page.read_text()
    assert "Data asset: papers" in text and "df.filter" not in text


def test_old_results_are_pruned_before_the_docs_are_built(validator):
    for _ in range(3):
        validator.validate("papers", papers(), PARAMS)
    root = Path(validator.context.root_directory) / "uncommitted" / "validations" / "papers"
    assert len(list(root.glob("*/*"))) >= 3
    validator.prune_results(keep=2)
    assert len(list(root.glob("*/*"))) == 2
