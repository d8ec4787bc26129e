"""Every cache is checked before it is trusted: seals, records, and damaged caches of a
real warehouse, each of which costs a warning and gives the checksum of an undamaged run."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from flows.core import cache
from flows.core.settings import Settings
from flows.ingest import paths
from flows.pipeline import paperlake
from flows.publish import history
from tests.conftest import SAMPLE_RAW, write

EXTRA = (
    "We propose a retrieval benchmark for chemistry questions where a retriever selects "
    "reactions from patents and a reader answers with cited evidence; grounded systems beat "
    "closed-book models by twelve points on three held-out sets."
)


def test_a_sealed_file_reads_back_and_any_change_to_it_is_damage(tmp_path):
    path = tmp_path / "rows.parquet"
    frame = pl.DataFrame({"paper_id": ["a", "b"], "score": [0.5, 0.25]})
    cache.write_parquet(path, frame)
    assert cache.read_parquet(path).equals(frame)
    seal = json.loads(cache.seal_path(path).read_text())
    assert seal["rows"] == 2 and seal["bytes"] == path.stat().st_size

    frame.with_columns(score=pl.Series([0.5, 0.75])).write_parquet(path)  # rewritten, unsealed
    with pytest.raises(cache.Damaged, match="differ from its seal|bytes where its seal"):
        cache.read_parquet(path)
    cache.write_parquet(path, frame)
    with pytest.raises(cache.Damaged, match="1 rows"):
        cache.read_parquet(path, lambda rows: f"{rows.height - 1} rows")
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(cache.Damaged):
        cache.read_parquet(path)
    cache.seal_path(path).unlink()
    with pytest.raises(cache.Damaged, match="no readable seal"):
        cache.verify(path)
    with pytest.raises(FileNotFoundError):
        cache.read_parquet(tmp_path / "none.parquet")


def test_a_record_carries_its_digest(tmp_path):
    path = tmp_path / "memo.json"
    cache.write_record(path, {"b": [1, 2], "a": "x"})
    assert cache.read_record(path) == {"b": [1, 2], "a": "x"}
    wrapped = json.loads(path.read_text())
    wrapped["record"]["a"] = "y"
    path.write_text(json.dumps(wrapped))
    with pytest.raises(cache.Damaged, match="differs from its digest"):
        cache.read_record(path)
    path.write_text('{"record": ')
    with pytest.raises(cache.Damaged, match="not a sealed record"):
        cache.read_record(path)


def test_a_wrong_digest_memo_is_caught_and_the_file_hashed_again(tmp_path, caplog):
    text = "ICLR 2026 Papers\n\n" + "an abstract of many words " * 10_000
    one, other = write(tmp_path / "one.txt", text), write(tmp_path / "other.txt", text + "!")
    for path in (one, other):
        os.utime(path, ns=(time.time_ns() - 60_000_000_000,) * 2)
    memo = paths.DigestMemo(tmp_path)
    right = {path: memo.digest(path)[0] for path in (one, other)}
    memo.save()
    # The memo names the other file's sha256 for `one`, its seal made again to match: the
    # file's stat is unchanged, but its edges do not fit that sha256.
    known = cache.read_record(tmp_path / paths.DigestMemo.NAME)
    known[str(one.resolve())][3] = right[other]
    cache.write_record(tmp_path / paths.DigestMemo.NAME, known)
    with caplog.at_level(logging.WARNING):
        assert paths.DigestMemo(tmp_path).digest(one)[0] == right[one]
    assert "disagrees with the file" in caplog.text
    # A memo edited by hand (its digest not made again) is dropped whole.
    wrapped = json.loads((tmp_path / paths.DigestMemo.NAME).read_text())
    wrapped["record"][str(one.resolve())][3] = "0" * 64
    (tmp_path / paths.DigestMemo.NAME).write_text(json.dumps(wrapped))
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        fresh = paths.DigestMemo(tmp_path)
    assert fresh.known == {} and "every raw file is hashed again" in caplog.text
    assert fresh.digest(one)[0] == right[one]


def flip_a_neighbour(warehouse: Path) -> None:
    """One neighbour of one list changed to another paper, the file rewritten by polars."""
    (path,) = (warehouse / "cache" / "neighbors").glob("lists-*/lists.parquet")
    lists = pl.read_parquet(path)
    papers = pl.read_parquet(path.parent / "ids.parquet").height
    flipped = (lists["neighbor"][0] + 1) % papers
    lists.with_columns(lists["neighbor"].scatter(0, flipped)).write_parquet(path)


def truncate(pattern: str) -> Callable[[Path], None]:
    def damage(warehouse: Path) -> None:
        path = sorted((warehouse / "cache").glob(pattern))[0]
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    return damage


def garble(pattern: str) -> Callable[[Path], None]:
    def damage(warehouse: Path) -> None:
        path = sorted((warehouse / "cache").glob(pattern))[0]
        data = bytearray(path.read_bytes())
        middle = len(data) // 2
        data[middle : middle + 64] = os.urandom(64)
        path.write_bytes(bytes(data))

    return damage


def unseal(pattern: str) -> Callable[[Path], None]:
    def damage(warehouse: Path) -> None:
        cache.seal_path(sorted((warehouse / "cache").glob(pattern))[0]).unlink()

    return damage


def other_digests(warehouse: Path) -> None:
    """A table digest the last commit kept, changed in the JSON (which stays valid)."""
    path = warehouse / "cache" / "published" / "digests.json"
    wrapped = json.loads(path.read_text())
    name = next(iter(wrapped["record"]["digests"]))
    wrapped["record"]["digests"][name] = "0:0:0:0"
    path.write_text(json.dumps(wrapped))


DAMAGE = {
    "a neighbour id flipped": flip_a_neighbour,
    "a parse truncated": truncate("parsed/*/records-*.parquet"),
    "a parse index garbled": lambda w: next((w / "cache" / "parsed").glob("*.json")).write_text(
        '{"path": "x", "sha256"'
    ),
    "a parse's part unsealed": unseal("parsed/*/records-*.parquet"),
    "an embedding part garbled": garble("embeddings/*/*.parquet"),
    "the text hashes truncated": truncate("embeddings/text-hashes/*.parquet"),
    "a per-paper rows file truncated": truncate("paper_rows/*/part-*.parquet"),
    "the term counts unsealed": unseal("paper_rows/term-counts-*.parquet"),
    "a row memo garbled": garble("dq/neighbors-*.parquet"),
    "a kept table digest changed": other_digests,
}


@pytest.fixture(scope="session")
def extra_raw(tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("extra") / "new.txt", f"ICLR 2026 Papers\n\n{EXTRA}\n")


@pytest.fixture(scope="session")
def undamaged(prefect_server, sample_run, extra_raw, tmp_path_factory) -> dict[str, str]:
    """The checksums of the sample warehouse after one more abstract, its caches whole."""
    warehouse = tmp_path_factory.mktemp("undamaged") / "warehouse"
    shutil.copytree(sample_run.settings.warehouse, warehouse)
    paperlake(raw=[str(SAMPLE_RAW), str(extra_raw)], warehouse=str(warehouse))
    return history.checksums(Settings(warehouse=warehouse))[1]


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_cache_costs_one_warning_and_publishes_what_an_undamaged_one_does(
    prefect_server, sample_run, extra_raw, undamaged, tmp_path, caplog, case
):
    warehouse = tmp_path / "warehouse"
    shutil.copytree(sample_run.settings.warehouse, warehouse)
    DAMAGE[case](warehouse)
    with caplog.at_level(logging.WARNING):
        summary = paperlake(raw=[str(SAMPLE_RAW), str(extra_raw)], warehouse=str(warehouse))
    assert summary.version == 2
    warnings = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"cache: {warehouse}")
    assert history.checksums(Settings(warehouse=warehouse))[1] == undamaged
