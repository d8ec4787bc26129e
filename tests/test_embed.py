"""Embed with the real packaged all-MiniLM-L6-v2."""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flows import embed
from flows.core.settings import PACKAGED_MODEL
from flows.embed import cache as embed_cache
from flows.embed import machine, vectors

TEXTS = [
    "Speculative decoding with several draft tokens accelerates language model inference.",
    "Drafting multiple candidate tokens speeds up the generation of large language models.",
    "Protein structures are predicted from amino-acid sequences with deep networks.",
]


def test_packaged_model_gives_unit_vectors_of_its_dimension():
    vectors = embed.encode(TEXTS, show_progress=False)
    _, info = embed.load_model(PACKAGED_MODEL)
    assert info.dim == 384
    assert info.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert len(info.weights_sha256) == 64
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sims = vectors @ vectors.T
    # The two decoding sentences are closer to each other than to the protein one.
    assert sims[0, 1] > sims[0, 2] + 0.2
    assert sims[0, 1] > sims[1, 2] + 0.2


def test_order_is_kept_whatever_the_length_sort():
    single = [embed.encode([t], show_progress=False)[0] for t in TEXTS]
    batch = embed.encode(TEXTS, show_progress=False)
    for one, row in zip(single, batch, strict=True):
        assert float(one @ row) > 0.999


@pytest.mark.skipif(not machine.cpu_has_bf16(), reason="CPU without native bf16")
def test_bf16_agrees_with_fp32():
    fast = embed.encode(TEXTS, precision="bf16", show_progress=False)
    exact = embed.encode(TEXTS, precision="fp32", show_progress=False)
    assert float(np.min(np.sum(fast * exact, axis=1))) > 0.999


def test_embed_papers_table_and_cache(tmp_path):
    papers = pl.DataFrame(
        {"paper_id": ["a", "b"], "title": [None, "A title"], "abstract": TEXTS[:2]}
    )
    first = embed.embed_papers(papers, show_progress=False, cache_dir=tmp_path)
    assert (first.computed, first.reused) == (2, 0)
    table = first.table
    assert table.columns == ["paper_id", "model", "dim", "embedding"]
    assert table["paper_id"].to_list() == ["a", "b"]
    assert table["dim"].to_list() == [384, 384]
    assert table["embedding"].list.len().to_list() == [384, 384]
    assert embed.paper_text(papers).to_list() == [TEXTS[0], "A title. " + TEXTS[1]]

    # Only the new text is encoded; the cached vectors come back unchanged.
    more = pl.concat(
        [papers, pl.DataFrame({"paper_id": ["c"], "title": [None], "abstract": [TEXTS[2]]})]
    )
    second = embed.embed_papers(more, show_progress=False, cache_dir=tmp_path)
    assert (second.computed, second.reused) == (1, 2)
    assert second.table["paper_id"].to_list() == ["a", "b", "c"]
    assert second.table["embedding"][:2].to_list() == table["embedding"].to_list()


def test_the_cache_gives_one_vector_a_text_the_first_parts(tmp_path):
    """A text two parts hold (two runs that encoded it at once) comes back once, with the
    vector of the part first by name; texts not asked for do not come back."""
    info = embed.ModelInfo("m", "/m", "w" * 64, 2, "cpu", "fp32")
    cache = embed.EmbeddingCache(tmp_path, info)
    vectors = pl.Series([[1.0, 0.0], [0.0, 1.0]], dtype=pl.List(pl.Float32))
    first = cache.add(pl.Series(["t1", "t2"]), vectors)
    other = pl.Series([[0.6, 0.8], [1.0, 0.0]], dtype=pl.List(pl.Float32))
    second = cache.add(pl.Series(["t2", "t3"]), other)
    found = cache.lookup(pl.Series(["t2", "t3", "t2", "t9"])).sort("text_sha256")
    assert found["text_sha256"].to_list() == ["t2", "t3"]
    t2 = [0.0, 1.0] if first.name < second.name else [0.6, 0.8]
    assert (
        found["embedding"].to_list()
        == pl.Series([t2, [1.0, 0.0]], dtype=pl.List(pl.Float32)).to_list()
    )


def test_unknown_model_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        embed.model_path(str(tmp_path / "no-such-model"))


def test_texts_are_encoded_most_tokens_first_counted_as_the_model_truncates():
    one_long_word = "Transformerization"  # 18 characters: [CLS] 3 word pieces [SEP]
    short_words = "a b c d e f g h"  # 15 characters: [CLS] 8 words [SEP]
    very_long = " ".join(["diffusion"] * 1000)  # cut at the model's 256 tokens
    texts = [one_long_word, short_words, very_long]
    assert vectors.text_lengths(texts).tolist() == [5, 10, 256]
    assert vectors.encoding_order(texts).tolist() == [2, 1, 0]


def test_texts_are_ordered_by_characters_where_the_model_has_no_tokenizer_json(tmp_path):
    texts = ["Transformerization", "a b c d e f g h"]
    assert vectors.text_lengths(texts, str(tmp_path)).tolist() == [18, 15]
    assert vectors.encoding_order(texts, str(tmp_path)).tolist() == [0, 1]


def test_texts_encoded_part_by_part_each_part_cached_as_it_is_done(tmp_path, monkeypatch):
    from flows.embed import papers as embed_papers

    texts = [f"{TEXTS[i % 3]} Variant {i} of the abstract, with its own words." for i in range(7)]
    papers = pl.DataFrame(
        {"paper_id": [f"p{i}" for i in range(7)], "title": [None] * 7, "abstract": texts},
        schema={"paper_id": pl.String, "title": pl.String, "abstract": pl.String},
    )
    whole = embed.embed_papers(papers, show_progress=False, cache_dir=tmp_path / "one")
    monkeypatch.setattr(embed_papers, "EMBED_PART", 3)
    parted = embed.embed_papers(papers, show_progress=False, cache_dir=tmp_path / "three")
    assert (
        parted.computed == 7 and parted.table["paper_id"].to_list() == papers["paper_id"].to_list()
    )
    # The same vectors (batched with other companions: equal to float32 rounding).
    a = np.asarray(whole.table["embedding"].to_list())
    b = np.asarray(parted.table["embedding"].to_list())
    assert np.allclose(a, b, atol=1e-5) and np.all(np.sum(a * b, axis=1) > 0.99999)
    # A cache part for each part of 3, 3 and 1 texts, as each was done.
    folder = embed_cache.EmbeddingCache(tmp_path / "three", parted.info).folder
    sizes = sorted(pl.read_parquet(part).height for part in folder.glob("*.parquet"))
    assert sizes == [1, 3, 3]
    again = embed.embed_papers(papers, show_progress=False, cache_dir=tmp_path / "three")
    assert (again.computed, again.reused) == (0, 7)


def test_vectors_do_not_depend_on_the_order_papers_come_in():
    # 64 texts of exactly 120 characters but different token counts: all tie in the
    # longest-first order, and the ties must not decide the batches (padding would differ).
    rng = np.random.default_rng(5)
    words = ["a", "graph", "transformer", "of", "neural", "x", "diffusion", "RL", "is", "bench"]
    texts = []
    for _ in range(64):
        text = " ".join(rng.choice(words, size=60))
        texts.append(text[:120].ljust(120, "."))
    papers = pl.DataFrame(
        {"paper_id": [f"p{i:02d}" for i in range(64)], "title": [None] * 64, "abstract": texts},
        schema={"paper_id": pl.String, "title": pl.String, "abstract": pl.String},
    )
    first = embed.embed_papers(papers, batch_size=8, show_progress=False).table
    shuffled = papers.sample(fraction=1.0, shuffle=True, seed=11)
    second = embed.embed_papers(shuffled, batch_size=8, show_progress=False).table
    a = first.sort("paper_id")["embedding"].to_list()
    b = second.sort("paper_id")["embedding"].to_list()
    assert np.array_equal(np.asarray(a), np.asarray(b))  # bit for bit


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(), max_size=40))
def test_text_hashes_are_the_sha256_of_each_texts_utf8_bytes_in_order(texts):
    expected = [hashlib.sha256(t.encode("utf-8")).hexdigest()[:32] for t in texts]
    assert embed_cache.text_sha256(pl.Series("text", texts, dtype=pl.String)).to_list() == expected


def test_a_runs_text_hashes_are_found_again_and_only_changed_texts_hashed(tmp_path, monkeypatch):
    papers = pl.DataFrame(
        {"paper_id": ["a", "b", "c"], "title": [None, "A title", ""],
         "abstract": [*TEXTS[:2], "ünïcode"]}
    )  # fmt: skip
    texts = embed.paper_text(papers)
    known = embed.TextHashes(tmp_path)
    stale = known.path.with_name("polars-0.0.0.parquet")  # another polars' file
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"")
    assert known.of(papers, embed.paper_text).to_list() == embed_cache.text_sha256(texts).to_list()
    assert not stale.exists()

    hashed = []
    real = embed_cache.text_sha256
    monkeypatch.setattr(embed_cache, "text_sha256", lambda t: hashed.extend(t) or real(t))
    assert known.of(papers, embed.paper_text).to_list() == real(texts).to_list()
    assert hashed == []  # all three found again
    # "b" rewritten, "c" gone, "d" new with "a"'s text; "a" with a title now: only the
    # three new texts are hashed
    again = pl.DataFrame(
        {"paper_id": ["a", "b", "d"], "title": ["New", "A title", None],
         "abstract": [TEXTS[0], TEXTS[2], TEXTS[0]]}
    )  # fmt: skip
    assert known.of(again, embed.paper_text).to_list() == real(embed.paper_text(again)).to_list()
    assert hashed == [f"New. {TEXTS[0]}", f"A title. {TEXTS[2]}", TEXTS[0]]
    assert pl.read_parquet(known.path)["paper_id"].to_list() == ["a", "b", "d"]


def test_text_hashes_of_papers_without_any_title(tmp_path):
    """A frame whose titles are all missing (a column of no type) hashes the abstracts."""
    papers = pl.DataFrame({"paper_id": ["a", "b"], "title": [None, None], "abstract": TEXTS[:2]})
    assert papers.schema["title"] == pl.Null
    hashes = embed.TextHashes(tmp_path).of(papers, embed.paper_text)
    assert hashes.to_list() == embed_cache.text_sha256(pl.Series(TEXTS[:2])).to_list()
