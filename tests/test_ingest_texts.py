"""The raw and clean abstracts held back from a run's frames (flows/core/held.py, flows/
ingest/texts.py): the papers hold their hashes, and the stages read the texts back from the
parts as they were read, for any rows, whole or in batches, from files read whole or in
chunks, small files parsed together and files of equal content; a part changed under the
run is refused, not published."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from flows import derive, embed, ingest, validate
from flows.core.errors import WarehouseError
from flows.core.held import HELD_BACK, IN_FRAME, published_columns
from flows.core.settings import Settings
from flows.publish import Previous
from tests.conftest import write

ROOT = Path(__file__).resolve().parents[1]
WHOLE = ingest.Chunking(file_bytes=1 << 40)
CHUNKED = ingest.Chunking(file_bytes=1, chunk_bytes=2048)
PARAMETERS = {"min_words": 20, "max_words": 1000, "model_dim": 384, "papers": 0,
              "neighbors_k": 3, "duplicate_threshold": 0.95, "max_reject_share": 1.0}  # fmt: skip
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
    for text, stand_in in HELD_BACK.items():
        assert text not in held.columns
        assert held.columns.index(stand_in) == whole.columns.index(text)
    assert (whole["abstract_raw"] != whole["abstract"]).sum() >= len(RAW)
    assert held.drop(HELD_BACK.values()).equals(whole.drop(HELD_BACK))
    assert result.texts.filled(held).equals(whole)
    # In batches of about 4 rows, each part read once: every row once, as filled.
    batches = list(result.texts.batches(held, 4))
    assert (len(batches) > 1 or len(set(parts)) == 1) and len(batches) <= len(set(parts))
    assert sum(b.height for b in batches) == whole.height
    assert pl.concat(batches).sort("paper_id").equals(whole.sort("paper_id"))
    # One text held back, the other not: only the one is read back.
    one = held.drop("abstract_hash").with_columns(abstract=whole["abstract"])
    assert result.texts.filled(one).equals(whole.select(published_columns(one.columns)))
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
    changed = changed.filter(pl.col("abstract_raw_hash") != pl.col("abstract_raw_hash_after"))
    # The clean text (and so the paper id) is the same: only the raw abstract's hash tells.
    assert changed.height == 1
    assert changed["abstract_hash"].equals(changed["abstract_hash_after"], check_names=False)


def test_a_part_changed_or_gone_under_the_run_is_refused_not_published(raw, tmp_path):
    result = ingest.ingest([raw], cache_dir=tmp_path / "cache", chunking=WHOLE)
    held = both_ways(result)[1]
    part = next(p for p, _, _ in result.parts
                if pl.read_parquet(p)["abstract_raw"].str.contains("sparse").any())  # fmt: skip
    rows = pl.read_parquet(part)
    for text, name in (("abstract_raw", "raw abstracts"), ("abstract", "abstracts")):
        rows.with_columns(pl.col(text).str.replace("sparse", "dense")).write_parquet(part)
        told = rf"the {name} of \d+ records read back .* not the ones this run read \(first: .+ "
        with pytest.raises(WarehouseError, match=told + r"record \d+\): .* run it again"):
            result.texts.filled(held)
        with pytest.raises(WarehouseError, match=told):
            pl.concat(result.texts.batches(held, 2))
    part.unlink()
    with pytest.raises(WarehouseError, match=r"cannot be read back .*No such file.* run it again"):
        result.texts.filled(held)
    # The next run finds the entry damaged, parses the file again and fills every row.
    again = ingest.ingest([raw], cache_dir=tmp_path / "cache", chunking=WHOLE)
    whole, held = both_ways(again)
    assert again.texts.filled(held).equals(whole)


def test_the_stages_give_from_held_back_papers_what_they_give_from_whole_ones(raw, tmp_path):
    """Embed, derive and validate read the abstracts back (`texts`) for the papers they work
    on: their tables and results equal those made from papers that hold every text, and
    the held-back papers never hold one."""
    result = ingest.ingest([raw], cache_dir=tmp_path / "cache", chunking=CHUNKED)
    (whole, sources), (held, _) = (ingest.build_papers(result.records),
                                   ingest.build_papers(result.held_back_records()))  # fmt: skip
    assert not {"abstract", "abstract_raw"} & set(held.columns)
    vectors = {
        name: embed.embed_papers(
            papers, show_progress=False, cache_dir=tmp_path / name, texts=texts
        ).table
        for name, papers, texts in (("whole", whole, IN_FRAME), ("held", held, result.texts))
    }
    assert vectors["held"].equals(vectors["whole"]) and vectors["held"].height == whole.height

    def derived(name: str, papers: pl.DataFrame, texts) -> dict[str, pl.DataFrame]:
        settings = Settings(warehouse=tmp_path / name, neighbors_k=3, n_topics=3, seed=7)
        inputs = {"sources": result.sources, "papers": papers, "paper_sources": sources,
                  "rejects": result.rejects}  # fmt: skip
        tables = derive.derive_tables(inputs, vectors["whole"], settings, "m", Previous(),
                                      texts=texts)  # fmt: skip
        return {t: frame.sort(frame.columns) for t, frame in tables.items() if frame.height}

    made = derived("whole", whole, IN_FRAME)
    assert made.keys() >= {"mentions", "topic_terms", "neighbors"}
    again = derived("held", held, result.texts)
    assert again.keys() == made.keys()
    for table, frame in made.items():
        assert again[table].equals(frame), table
    checked = {
        name: validate.Validator(
            tmp_path / f"gx-{name}", "run", tmp_path / f"dq-{name}", texts
        ).validate("papers", papers, PARAMETERS)
        for name, papers, texts in (("whole", whole, IN_FRAME), ("held", held, result.texts))
    }
    assert checked["held"].equals(checked["whole"])
    assert checked["held"].filter(pl.col("column_name") == "abstract").height == 4
