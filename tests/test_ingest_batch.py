"""Small files parsed together: every file's sources row, records and rejects are those
it has parsed alone; their parse-cache entries share one part, and a damaged shared part
costs one warning and a parse again."""

from __future__ import annotations

import json
import logging

import polars as pl
import pytest

from flows import ingest
from flows.ingest import batch
from tests.conftest import write
from tests.hostile import (
    OPENREVIEW_HEADER,
    PYTHON_SOURCE,
    export_jsonl,
    mojibake,
    openreview_rows,
    proper_csv,
    sample_abstracts,
    stripped_letter,
    undoubled_csv,
)

ABSTRACTS = sample_abstracts()


@pytest.fixture
def mixed(tmp_path):
    """A raw folder of small files of every kind, and one larger than a small file."""
    raw = tmp_path / "raw"
    for i in range(12):
        write(raw / "iclr_2026" / f"one{i:02d}.txt", ABSTRACTS[i] + "\n")
    write(raw / "iclr_2026" / "again.txt", ABSTRACTS[0] + "\n")  # the content of one00.txt
    write(raw / "rows.csv", proper_csv(openreview_rows(5), OPENREVIEW_HEADER) + "x,y\n")
    write(raw / "quotes.csv", undoubled_csv(openreview_rows(4), OPENREVIEW_HEADER))
    write(raw / "lost_p.jsonl", export_jsonl([stripped_letter(a, "p") for a in ABSTRACTS[:6]]))
    write(raw / "latin.jsonl", export_jsonl([mojibake(f"{a} café — “x”") for a in ABSTRACTS[6:9]]))
    write(raw / "code.json", PYTHON_SOURCE)
    write(raw / "image.json", b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    write(raw / "empty.txt", "")
    write(raw / "big.jsonl", export_jsonl([a + " More." * 200 for a in ABSTRACTS[:10]]))
    return raw


def alone(monkeypatch) -> None:
    """Every file parsed on its own, as before batches."""
    monkeypatch.setattr(batch, "SMALL_FILE_BYTES", -1)


def read_all(raw, cache=None) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    result = ingest.ingest([raw], cache_dir=cache)
    return result.sources, result.records, result.rejects


@pytest.mark.parametrize("cached", [False, True])
def test_small_files_together_give_what_each_gives_alone(mixed, tmp_path, monkeypatch, cached):
    monkeypatch.setattr(batch, "SMALL_FILE_BYTES", 20_000)  # big.jsonl is larger
    together = read_all(mixed, tmp_path / "together" if cached else None)
    with monkeypatch.context() as m:
        alone(m)
        apart = read_all(mixed, tmp_path / "apart" if cached else None)
    for mine, theirs in zip(together, apart, strict=True):
        assert mine.equals(theirs)
    sources = {p.rsplit("/", 1)[-1]: w for p, w in together[0].select("path", "warning").rows()}
    assert sources["lost_p.jsonl"].startswith("'p' is 0.00% of its letters")
    assert sources["latin.jsonl"].startswith("mojibake such as")
    assert together[1]["source_path"].n_unique() == 18  # code.json, image.json, empty.txt: none
    if cached:  # read back from the cache, the same again
        again = read_all(mixed, tmp_path / "together")
        for mine, theirs in zip(again, apart, strict=True):
            assert mine.equals(theirs)


def test_small_files_share_one_records_part_in_the_parse_cache(tmp_path):
    raw = tmp_path / "raw"
    for i in range(200):
        write(raw / "iclr_2026" / f"paper{i:03d}.txt", f"{ABSTRACTS[i % 38]} Paper {i}.\n")
    result = ingest.ingest([raw], cache_dir=tmp_path / "cache")
    assert result.records.height == 200
    parts = sorted((tmp_path / "cache").rglob("*.parquet"))
    assert [p.relative_to(tmp_path / "cache").parent.name[:6] for p in parts] == ["batch-"]
    assert len(list((tmp_path / "cache").glob("*.json"))) == 200  # an index a file
    again = ingest.ingest([raw], cache_dir=tmp_path / "cache")
    assert all(f.cached for f in again.files)
    assert again.records.equals(result.records)


def test_a_damaged_shared_part_costs_one_warning_and_a_parse_again(tmp_path, caplog):
    raw, cache = tmp_path / "raw", tmp_path / "cache"
    for i in range(20):
        write(raw / "iclr_2026" / f"paper{i:02d}.txt", f"{ABSTRACTS[i]} Paper {i}.\n")
    first = ingest.ingest([raw], cache_dir=cache)
    (part,) = cache.rglob("batch-*/records-*.parquet")
    part.write_bytes(part.read_bytes()[:-100])
    with caplog.at_level(logging.WARNING):
        again = ingest.ingest([raw], cache_dir=cache)
    warnings = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert len(warnings) == 1 and str(part) in warnings[0], warnings
    assert not any(f.cached for f in again.files)
    assert again.records.equals(first.records)
    assert json.loads(again.sources["rejected_by_rule"][0]) == {}
