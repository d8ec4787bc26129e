"""The raw abstracts held back from a run's frames (flows/core/held.py, flows/ingest/
texts.py): the papers hold their hashes, and publish reads the texts back from the parts as
they were read, for any rows, from files read whole or in chunks, small files parsed
together and files of equal content; a part changed under the run is refused, not
published."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from flows import ingest
from flows.core.errors import WarehouseError
from flows.core.held import HELD_BACK, STAND_IN
from tests.conftest import write

ROOT = Path(__file__).resolve().parents[1]
WHOLE = ingest.Chunking(file_bytes=1 << 40)
CHUNKED = ingest.Chunking(file_bytes=1, chunk_bytes=2048)
# Raw abstracts that cleaning changes: LaTeX markup, doubled spaces, a control character.
RAW = [
    "We study \\textbf{sparse} attention over  long contexts and show that a learned router "
    "keeps accuracy while it halves the memory of every layer on three benchmarks.",
    "Graph networks\u0007 fail on heterophilous graphs; we propose a spectral filter that "
    "adapts per node and improves node classification on nine datasets by four points.",
    "A  survey of   diffusion models for protein design: sampling, guidance, evaluation, "
    "and the open problems of scoring designed sequences against wet-lab results.",
]


@pytest.fixture
def raw(tmp_path) -> Path:
    """The sample dumps, a JSON Lines file of edited raw abstracts, its copy under another
    name, and small files of one abstract each (parsed together into one part)."""
    folder = tmp_path / "raw"
    shutil.copytree(ROOT / "data" / "raw", folder)
    lines = [json.dumps({"id": f"x{i}", "abstract": text}) for i, text in enumerate(RAW)]
    write(folder / "edited.jsonl", "\n".join(lines) + "\n")
    write(folder / "copy" / "edited-again.jsonl", "\n".join(lines) + "\n")
    for i, text in enumerate(RAW):
        write(folder / "small" / f"{i}.txt", text.replace("sparse", f"sparse {i}") + "\n")
    return folder


def both_ways(result: ingest.IngestResult) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The papers built from whole records, and from records whose raw abstracts are held."""
    return ingest.build_papers(result.records)[0], ingest.build_papers(
        result.held_back_records())[0]  # fmt: skip


@pytest.mark.parametrize("chunking", [WHOLE, CHUNKED], ids=["whole", "chunked"])
@pytest.mark.parametrize("cached", [True, False], ids=["cache", "spill"])
def test_papers_filled_back_equal_papers_built_from_whole_records(raw, tmp_path, chunking, cached):
    cache = tmp_path / "cache" if cached else None
    result = ingest.ingest([raw], cache_dir=cache, chunking=chunking)
    parts = [part for part, _, _ in result.parts]
    # Parts of several files (a batch, equal contents): as spans of one part, or rows that
    # carry their own paths.
    assert len(set(parts)) < len(parts) or None in [path for _, path, _ in result.parts]
    whole, held = both_ways(result)
    assert HELD_BACK not in held.columns and held.columns.index(STAND_IN) == whole.columns.index(
        HELD_BACK)  # fmt: skip
    assert (whole["abstract_raw"] != whole["abstract"]).sum() >= len(RAW)
    assert held.drop(STAND_IN).equals(whole.drop(HELD_BACK))
    assert result.texts.filled(held).equals(whole)
    # Any rows, in any order: only theirs are read back.
    some = held.sample(n=9, seed=3, shuffle=True)
    expected = some.select("paper_id").join(whole, on="paper_id", maintain_order="left")
    assert result.texts.filled(some).equals(expected)
    assert result.texts.filled(held.clear()).equals(whole.clear())


def test_a_changed_raw_abstract_changes_the_hash_that_stands_in_for_it(raw, tmp_path):
    before = both_ways(ingest.ingest([raw], cache_dir=tmp_path / "cache"))[1]
    for edited in (raw / "edited.jsonl", raw / "copy" / "edited-again.jsonl"):
        edited.write_text(edited.read_text().replace("over  long", "over long"))
    after = both_ways(ingest.ingest([raw], cache_dir=tmp_path / "cache"))[1]
    changed = before.join(after, on=["paper_id", "source_path", "record_no"], suffix="_after")
    changed = changed.filter(pl.col(STAND_IN) != pl.col(f"{STAND_IN}_after"))
    # The clean text (and so the paper id) is the same: only the raw abstract's hash tells.
    assert changed.height == 1 and changed["abstract"][0].startswith("We study sparse")


def test_a_part_changed_or_gone_under_the_run_is_refused_not_published(raw, tmp_path):
    result = ingest.ingest([raw], cache_dir=tmp_path / "cache", chunking=WHOLE)
    held = both_ways(result)[1]
    part = next(p for p, _, _ in result.parts
                if pl.read_parquet(p)[HELD_BACK].str.contains("sparse").any())  # fmt: skip
    rows = pl.read_parquet(part)
    rows.with_columns(pl.col(HELD_BACK).str.replace("sparse", "dense")).write_parquet(part)
    told = r"raw abstracts of \d+ records read back .* not the ones this run read \(first: .+ "
    with pytest.raises(WarehouseError, match=told + r"record \d+\): .* run it again"):
        result.texts.filled(held)
    part.unlink()
    with pytest.raises(WarehouseError, match=r"cannot be read back .*No such file.* run it again"):
        result.texts.filled(held)
    # The next run finds the entry damaged, parses the file again and fills every row.
    again = ingest.ingest([raw], cache_dir=tmp_path / "cache", chunking=WHOLE)
    whole, held = both_ways(again)
    assert again.texts.filled(held).equals(whole)
