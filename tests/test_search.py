"""Search on the sample warehouse: hybrid, dense and keyword modes, filters, similar."""

from __future__ import annotations

import re

import pytest

from flows import search
from flows.lake import open_lake
from flows.settings import SQL_DIR


def test_fusion_methods_on_explicit_lists():
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    keyword = [("b", 12.0), ("d", 6.0), ("a", 2.0)]
    # Scaled scores: a = 1 + 0, b = 0.5 + 1, c = 0, d = 0.4.
    assert search.fuse([dense, keyword], 10, "score") == [
        ("b", 1.5), ("a", 1.0), ("d", 0.4), ("c", 0.0)
    ]  # fmt: skip
    rrf = dict(search.fuse([dense, keyword], 10, "rrf"))
    assert rrf["a"] == pytest.approx(1 / 61 + 1 / 63)
    assert rrf["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert search.fuse([dense, keyword], 2, "rrf")[0][0] == "b"
    with pytest.raises(ValueError, match="fusion must be one of score, rrf"):
        search.fuse([dense], 3, "max")


def test_modes_find_the_right_abstracts(sample_run):
    settings = sample_run.settings
    with open_lake(settings) as con:
        neon = search.search(
            con, "anti-alignment of synthetic data gradients in self-training", settings
        )
        assert neon["abstract"][0].startswith("Scaling generative AI models")
        assert "Neon" in neon["abstract"][0]
        for mode in ("dense", "keyword", "hybrid"):
            hits = search.search(con, "diffusion language model decoding", settings, k=3, mode=mode)
            assert hits.columns == ["paper_id", "title", "venue", "year", "score", "abstract"]
            assert any("Prophet" in a for a in hits["abstract"]), mode
        keyword = search.search(con, "SparseD sparse attention", settings, k=1, mode="keyword")
        assert "SparseD" in keyword["abstract"][0]
        assert search.index_path(settings, 1).exists()  # built once, reused afterwards


def test_filters_and_similar(sample_run):
    settings = sample_run.settings
    with open_lake(settings) as con:
        assert search.search(con, "decoding", settings, venue="NeurIPS").height == 0
        assert search.search(con, "decoding", settings, k=5, venue="iclr", year=2026).height == 5
        first = search.search(con, "speculative sampling drafts", settings, k=1, mode="dense")
        paper = first["paper_id"][0]
        close = search.similar(con, paper, k=3)
        assert close.height == 3 and paper not in close["paper_id"].to_list()
        neighbors = con.execute(
            "select neighbor_id from neighbors where paper_id = ? order by rank limit 3", [paper]
        ).fetchall()
        assert close["paper_id"].to_list() == [n[0] for n in neighbors]
        with pytest.raises(ValueError, match="no paper nope in this version"):
            search.similar(con, "nope")


def test_every_paper_has_a_topic_with_a_readable_label(sample_run):
    with open_lake(sample_run.settings) as con:
        assert con.execute("select count(distinct paper_id) from paper_topics").fetchone() == (38,)
        labels = [r[0] for r in con.execute("select label from topics").fetchall()]
    assert len(labels) >= 2
    for label in labels:
        term = r"[a-z][a-z0-9-]+( [a-z][a-z0-9-]+)?"  # a word or a two-word phrase
        assert re.fullmatch(rf"{term}(, {term}){{2,3}}", label), label
    assert len(set(labels)) == len(labels)


EXPECTED_FIRST_ROWS = {
    "most_used_benchmarks": ("GSM8K", "benchmark", 3),
    "papers_with_code": None,
    "near_duplicate_pairs": None,
    "papers_per_run": (1,),
    "reject_reasons": None,
    "topics_by_venue": ("ICLR", 2026),
}


@pytest.mark.parametrize("name", sorted(p.stem for p in (SQL_DIR / "queries").glob("*.sql")))
def test_example_queries_run_on_the_sample(sample_run, name):
    with open_lake(sample_run.settings) as con:
        rows = con.execute((SQL_DIR / "queries" / f"{name}.sql").read_text()).fetchall()
    expected = EXPECTED_FIRST_ROWS[name]
    if name == "reject_reasons":
        assert rows == []  # the sample has no rejects
    elif name == "papers_with_code":
        assert sorted(r[3] for r in rows) == [
            "https://github.com/pixas/DECS",
            "https://github.com/truongbuu/cross-tokenizer-scoring",
        ]
    elif name == "near_duplicate_pairs":
        assert 0 < len(rows) <= 20 and all(0 < r[4] < 0.95 for r in rows)
    else:
        assert rows and rows[0][: len(expected)] == expected
