"""CSV exports whose quoted abstracts hold quotes that were not doubled
(`"a "so-called" method"`): a one-line row is read whole when every other column parses,
and a row no reading pins down stays rejected, never misassigned."""

from __future__ import annotations

import json

import polars as pl

from flows import ingest
from tests.conftest import write
from tests.hostile import (
    OPENREVIEW_HEADER,
    inner_quote_rows,
    openreview_rows,
    undoubled_csv,
    unpinned_rows,
)


def fields_of(row: dict[str, str]) -> dict:
    """What a record read from an OpenReview-like row must hold."""
    return {
        "external_id": row["id"],
        "title_raw": row["title"],
        "authors": row["authors"].split(", "),
        "abstract_raw": row["abstract"],
        "keywords": row["keywords"].split(", "),
        "decision": row["decision"],
    }


def test_rows_with_undoubled_inner_quotes_are_read_whole_and_none_misassigned(tmp_path):
    rows = inner_quote_rows(2000)
    unpinned = unpinned_rows()
    # Each row no reading pins down is followed by a good one, which must not be lost.
    everything = rows[:500] + [
        r for pair in zip(unpinned, rows[500:503], strict=True) for r in pair
    ]
    everything += rows[503:]
    path = write(tmp_path / "ICLR17_quotes.csv", undoubled_csv(everything, OPENREVIEW_HEADER))
    result = ingest.ingest([path])
    source = result.sources.row(0, named=True)
    quoted = {r["id"] for r in rows if '"' in r["abstract"]}
    assert len(quoted) >= 500
    records = {r["external_id"]: r for r in result.records.iter_rows(named=True)}
    recovered = quoted & records.keys()
    assert len(recovered) >= 0.99 * len(quoted)
    # Every record read, recovered or not, holds its own row's fields, field by field.
    for row in rows:
        if row["id"] in records:
            got = records[row["id"]]
            assert {k: got[k] for k in fields_of(row)} == fields_of(row), row["id"]
            assert ("repaired_quotes" in got["flags"]) == (row["id"] in quoted), row["id"]
    assert len(records) == len(rows)
    # The rows no reading pins down are rejected with why; the rows after them are read.
    assert (source["records_seen"], source["accepted"], source["rejected"]) == (2003, 2000, 3)
    assert json.loads(source["rejected_by_rule"]) == {"unparseable_row": 3}
    reasons = result.rejects["reason"].to_list()
    assert all(r.startswith("CSV error: ") for r in reasons)
    assert all("no reading with one field's inner quotes left undoubled" in r for r in reasons)
    snippets = result.rejects["raw_snippet"].to_list()
    assert [s.split(",", 1)[0] for s in snippets] == ["unpinned0", "unpinned1", "unpinned2"]


def test_a_quote_that_ends_an_abstract_does_not_swallow_the_next_row(tmp_path):
    rows = openreview_rows(3)
    rows[0]["abstract"] += ' It ends with one lone quote "'
    text = undoubled_csv(rows, OPENREVIEW_HEADER)
    result = ingest.ingest([write(tmp_path / "rows.csv", text)])
    got = result.records.sort("record_no")
    assert got["external_id"].to_list() == ["or00000", "or00001", "or00002"]
    assert got["abstract_raw"][0] == rows[0]["abstract"]
    assert got["line"].to_list() == [2, 3, 4]
    offsets = [text.encode().index(f"\nor0000{i},".encode()) + 1 for i in range(3)]
    assert got["byte_offset"].to_list() == offsets
    assert got.filter(pl.col("external_id") == "or00001")["abstract_raw"][0] == rows[1]["abstract"]
