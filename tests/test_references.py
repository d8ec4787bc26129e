"""Declared references between tables are checked: an id that is no key of the table it names
fails a blocking check that names it."""

from __future__ import annotations

import json

import polars as pl

from flows.validate.references import EXPECTATION, check_references


def frames(neighbor_ids: list[str]) -> dict[str, pl.DataFrame]:
    return {
        "papers": pl.DataFrame({"paper_id": ["a", "b", "c"], "source_path": ["x.txt"] * 3}),
        "sources": pl.DataFrame({"path": ["x.txt"]}),
        "neighbors": pl.DataFrame(
            {"paper_id": ["a", "b", "c"], "neighbor_id": neighbor_ids, "rank": [1, 1, 1]}
        ),
    }


def test_every_reference_among_the_tables_given_passes_when_every_id_is_a_key():
    rows = check_references(frames(["b", "a", "a"]), "run-1")
    assert rows.select("suite", "column_name", "success", "element_count").rows() == [
        ("papers", "source_path", True, 1),
        ("neighbors", "paper_id", True, 3),
        ("neighbors", "neighbor_id", True, 2),
    ]
    assert set(rows["expectation"]) == {EXPECTATION} and rows["blocking"].all()


def test_an_id_that_is_no_key_fails_blocking_and_is_named():
    rows = check_references(frames(["b", "zz", "zz"]), "run-1")
    failed = rows.filter(~pl.col("success")).to_dicts()
    assert len(failed) == 1
    assert failed[0]["suite"] == "neighbors" and failed[0]["column_name"] == "neighbor_id"
    assert failed[0]["unexpected_count"] == 1 and failed[0]["unexpected_ids"] == ["zz"]
    assert failed[0]["blocking"] and failed[0]["severity"] == "critical"
    assert json.loads(failed[0]["kwargs"]) == {
        "column": "neighbor_id", "table": "papers", "key": "paper_id",
    }  # fmt: skip


def test_a_reference_to_a_table_not_given_is_not_checked():
    given = frames(["b", "a", "a"])
    del given["sources"]
    assert "source_path" not in check_references(given, "run-1")["column_name"].to_list()
