"""Search on the sample warehouse: hybrid, dense and keyword modes, filters, similar;
what each hit carries (links, topic, scores) and when no hit is a good match."""

from __future__ import annotations

import contextlib
import logging
import os
import re

import duckdb
import numpy as np
import polars as pl
import pytest

from flows import read
from flows.core.lake import connect, open_lake, read_sql
from flows.core.settings import SQL_DIR
from flows.read import hits as read_hits
from flows.read import ranking, search_index


def test_fusion_methods_on_explicit_lists():
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    keyword = [("b", 12.0), ("d", 6.0), ("a", 2.0)]
    # Scaled scores: a = 1 + 0, b = 0.5 + 1, c = 0, d = 0.4.
    assert read.fuse([dense, keyword], 10, "score") == [
        ("b", 1.5), ("a", 1.0), ("d", 0.4), ("c", 0.0)
    ]  # fmt: skip
    rrf = dict(read.fuse([dense, keyword], 10, "rrf"))
    assert rrf["a"] == pytest.approx(1 / 61 + 1 / 63)
    assert rrf["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert read.fuse([dense, keyword], 2, "rrf")[0][0] == "b"
    with pytest.raises(ValueError, match="fusion must be one of score, rrf"):
        read.fuse([dense], 3, "max")


def test_best_keeps_the_k_highest_ties_by_id():
    scores = np.array([0.5, 0.9, 0.5, 0.1, 0.5])
    ids = ["e", "a", "c", "b", "d"]
    assert ranking.best(scores, ids, 3) == [("a", 0.9), ("c", 0.5), ("d", 0.5)]
    assert ranking.best(scores, ids, 10) == [
        ("a", 0.9), ("c", 0.5), ("d", 0.5), ("e", 0.5), ("b", 0.1)
    ]  # fmt: skip


def test_filters_ignore_case_and_take_a_topic_id_or_label_words():
    facets = pl.DataFrame(
        {
            "paper_id": ["p", "q", "r"],
            "venue": ["ICLR", "iclr", None],
            "year": [2026, 2025, 2026],
            "topic_id": [1, 12, None],
            "topic": ["speculative decoding, drafts", "graphs, molecules", None],
        }
    )
    assert ranking.filtered(facets) is None
    assert ranking.filtered(facets, venue="Iclr") == ["p", "q"]
    assert ranking.filtered(facets, year=2026) == ["p", "r"]
    assert ranking.filtered(facets, topic=1) == ["p"]  # not 12
    assert ranking.filtered(facets, topic=" DECODING ") == ["p"]
    assert ranking.filtered(facets, venue="iclr", year=2025, topic="12") == ["q"]
    assert ranking.filtered(facets, topic="no such topic") == []


def test_modes_find_the_right_abstracts(sample_run):
    settings = sample_run.settings
    with open_lake(settings) as con:
        neon = read.search_papers(
            con, "anti-alignment of synthetic data gradients in self-training", settings
        )
        assert neon["abstract"][0].startswith("Scaling generative AI models")
        assert "Neon" in neon["abstract"][0]
        for mode in ("dense", "keyword", "hybrid"):
            hits = read.search_papers(
                con, "diffusion language model decoding", settings, k=3, mode=mode
            )
            assert hits.columns == list(read_hits.HITS_SCHEMA)
            assert hits["rank"].to_list() == [1, 2, 3]
            assert any("Prophet" in a for a in hits["abstract"]), mode
        keyword = read.search_papers(con, "SparseD sparse attention", settings, k=1, mode="keyword")
        assert "SparseD" in keyword["abstract"][0]
        assert search_index.index_path(settings, 1).exists()  # built once, reused afterwards


QUERIES = [
    "diffusion language model decoding",
    "the chain of thought",
    "SparseD sparse attention",
    "reinforcement learning from human feedback",
    "GPT-4 and LLaMA",
    "zzyzx",
    "of the",
]


def test_keyword_scores_are_the_full_text_macros_from_postings(sample_run, tmp_path):
    """The postings the index keeps give every paper the BM25 score of DuckDB's own
    match_bm25 over the sample's abstracts, and the papers holding every word are those its
    conjunctive mode finds."""
    with open_lake(sample_run.settings) as con:
        index = search_index.build_keyword_index(con, tmp_path / "index.duckdb")
        ids = [pid for (pid,) in con.execute("select paper_id from papers").fetchall()]
        with search_index.keyword_scope(con, index):
            for text in QUERIES:
                [(terms,)] = con.execute(read_sql("search/terms"), {"text": text}).fetchall()
                macro = con.execute(
                    "select paper_id, fts_main_docs.match_bm25(paper_id, $text) as score, "
                    "$terms is not null and fts_main_docs.match_bm25(paper_id, $terms, "
                    "conjunctive := 1) is not null from docs where score is not null "
                    "order by score desc, paper_id",
                    {"text": text, "terms": terms},
                ).fetchall()
                found = ranking.keyword_scores(con, text, len(ids))
                assert [p for p, _ in found] == [p for p, _, _ in macro], text
                assert [s for _, s in found] == pytest.approx([s for _, s, _ in macro]), text
                every = ranking.holding_every_word(con, text, ids)
                assert every == {p for p, _, held in macro if held}, text
            assert len(ranking.keyword_scores(con, QUERIES[0], 3)) == 3
            assert ranking.keyword_scores(con, QUERIES[0], 50, ids[:2]) == [
                (p, s) for p, s in ranking.keyword_scores(con, QUERIES[0], 50) if p in ids[:2]
            ]
            assert ranking.keyword_scores(con, "zzyzx", 10) == []


def test_filters_and_similar(sample_run):
    settings = sample_run.settings
    with open_lake(settings) as con:
        assert read.search_papers(con, "decoding", settings, venue="NeurIPS").height == 0
        assert (
            read.search_papers(con, "decoding", settings, k=5, venue="iclr", year=2026).height == 5
        )
        first = read.search_papers(con, "speculative sampling drafts", settings, k=1, mode="dense")
        paper = first["paper_id"][0]
        close = read.similar_papers(con, paper, k=3)
        assert close.height == 3 and paper not in close["paper_id"].to_list()
        neighbors = con.execute(
            "select neighbor_id from neighbors where paper_id = ? order by rank limit 3", [paper]
        ).fetchall()
        assert close["paper_id"].to_list() == [n[0] for n in neighbors]
        with pytest.raises(ValueError, match="no paper nope in this version"):
            read.similar_papers(con, "nope")


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


def tiny_papers() -> duckdb.DuckDBPyConnection:
    """Six papers with every kind of id a link is made from, their topics and vectors."""
    con = connect()
    con.execute(
        """
        create table papers as select * from (values
            ('doi', '10.1103/PhysRevD.76.013009', 'arXiv', null,
                []::struct(url varchar, kind varchar)[]),
            ('arxiv', '0704.0001', 'arXiv', null, []),
            ('old-arxiv', 'hep-th/9901001v2', 'arXiv', null, []),
            ('forum', 'HJWHIKqgl', 'ICLR', '2', []),
            ('pmid', '41590124', 'Lancet', null,
                [{'url': 'https://github.com/a/b', 'kind': 'code'},
                 {'url': 'https://example.org/paper', 'kind': 'web'}]),
            ('plain', 'row-17', 'Workshop', null, [])
        ) t(paper_id, external_id, venue, decision, links)
        """
    )  # fmt: skip
    con.execute(
        "alter table papers add column title varchar; alter table papers add column authors "
        "varchar[]; alter table papers add column year integer; alter table papers add "
        "column abstract varchar; update papers set title = 'T ' || paper_id, "
        "authors = ['Ada', 'Bo'], year = 2020, abstract = 'A ' || paper_id"
    )
    con.execute(
        "create table topics as select 1 as topic_id, 'speculative decoding, drafts' as label"
    )
    con.execute("create table paper_topics as select paper_id, 1 as topic_id from papers")
    con.execute(
        "create table embeddings as select paper_id, "
        "case when paper_id = 'doi' then [1.0, 0.0] else [0.6, 0.8] end::float[] as embedding "
        "from papers"
    )
    return con


def test_hits_carry_links_topic_and_both_scores():
    con = tiny_papers()
    ranked = [(p, 0.0) for p in ("doi", "arxiv", "old-arxiv", "forum", "pmid", "plain")]
    hits = read_hits.hits(
        con, ranked, query=np.array([1.0, 0.0], dtype=np.float32), bm25={"forum": 3.5},
        all_words={"forum"},
    )  # fmt: skip
    assert hits["paper_id"].to_list() == [p for p, _ in ranked]
    assert hits["link"].to_list() == [
        "https://doi.org/10.1103/PhysRevD.76.013009",
        "https://arxiv.org/abs/0704.0001",
        "https://arxiv.org/abs/hep-th/9901001v2",
        "https://openreview.net/forum?id=HJWHIKqgl",
        "https://example.org/paper",  # a PubMed id says no site: the abstract's web link
        None,
    ]
    assert hits["code"].to_list() == [None] * 4 + ["https://github.com/a/b", None]
    assert hits["topic"].to_list() == ["speculative decoding, drafts"] * 6
    assert hits["authors"][0].to_list() == ["Ada", "Bo"]
    # Cosine as is: 1 for the same direction, 0.6 for [0.6, 0.8].
    assert hits["score"].to_list() == [1.0] + [0.6] * 5
    assert hits["bm25"].to_list() == [None, None, None, 3.5, None, None]
    assert hits["all_words"].to_list() == [False, False, False, True, False, False]
    assert hits["good_match"].to_list() == [True] + [True] * 5
    assert hits["no_good_match"].to_list() == [False] * 6
    strict = read_hits.hits(con, ranked, query=np.array([1.0, 0.0]), all_words={"forum"},
                         min_cosine=0.7, min_cosine_words=0.6)  # fmt: skip
    assert strict["good_match"].to_list() == [True, False, False, True, False, False]
    weak = read_hits.hits(con, ranked[1:3], query=np.array([1.0, 0.0]), min_cosine=0.7)
    assert weak["no_good_match"].to_list() == [True, True]
    only_venue = read_hits.hits(con, ranked, venue="arxiv")
    assert only_venue["rank"].to_list() == [1, 2, 3]
    assert only_venue["score"].to_list() == [None] * 3  # no query vector: no cosine


def test_no_good_match_says_how_close_the_best_hit_came():
    weak = pl.DataFrame({"score": [0.41, 0.33], "good_match": [False, False]})
    assert read.no_good_match(weak) == (
        "no good match: the closest paper's cosine is 0.41 (a good match reaches 0.50, or "
        "0.25 holding every word of the query)"
    )
    assert read.no_good_match(weak.with_columns(good_match=pl.Series([False, True]))) is None
    words = pl.DataFrame(
        {"score": [None], "good_match": [False]},
        schema={"score": pl.Float64, "good_match": pl.Boolean},
    )
    assert read.no_good_match(words) == "no good match: no paper holds every word of the query"
    assert read.no_good_match(pl.DataFrame(schema=read_hits.HITS_SCHEMA)) is None


def test_a_query_the_sample_knows_nothing_about_is_no_good_match(sample_run):
    settings = sample_run.settings
    with open_lake(settings) as con:
        molecules = read.search_papers(con, "graph neural networks for molecules", settings, k=5)
        decoding = read.search_papers(con, "speculative decoding", settings, k=5)
        chain = read.search_papers(con, "chain of thought", settings, k=3)
    assert not molecules["good_match"].any() and molecules["no_good_match"].all()
    assert molecules["score"].max() < read.MIN_COSINE
    assert read.no_good_match(molecules).startswith("no good match: the closest paper's")
    assert decoding["abstract"][0].startswith("Speculative sampling reduces the latency")
    assert decoding["all_words"][0] and decoding["good_match"][0]
    assert read.no_good_match(decoding) is None
    # "of" is a stop word: the paper holds every word that counts.
    assert chain["abstract"][0].startswith("Chain-of-Thought (CoT) reasoning")
    assert chain["all_words"][0] and chain["good_match"][0]


def test_topic_filter_by_id_or_label_words(sample_run):
    settings = sample_run.settings
    with open_lake(settings) as con:
        topics = dict(con.execute("select topic_id, label from topics").fetchall())
        members = dict(con.execute("select paper_id, topic_id from paper_topics").fetchall())
        for topic_id, label in topics.items():
            hits = read.search_papers(con, "language models", settings, k=50, topic=topic_id)
            assert hits.height == sum(t == topic_id for t in members.values())
            assert set(hits["topic_id"]) == {topic_id}
            word = label.split(",")[0].upper()  # case is ignored
            by_word = read.search_papers(con, "language models", settings, k=50, topic=word)
            assert topic_id in set(by_word["topic_id"])
        assert read.search_papers(con, "decoding", settings, topic="no such topic").height == 0
        keyword = read.search_papers(con, "decoding", settings, mode="keyword", topic=1)
        assert set(keyword["topic_id"]) <= {1} and keyword["score"].null_count() == keyword.height


def test_search_files_of_versions_looked_at_long_ago_are_dropped(tmp_path):
    """The keyword index, vectors and postings of the versions written last are kept, older
    ones and files of an older layout dropped, and nothing else in the folder is touched."""
    layout = search_index.LAYOUT
    for version in range(1, 7):
        index = tmp_path / f"v{version}-{layout}.duckdb"
        index.write_text("index")
        folder = tmp_path / f"v{version}-vectors"
        folder.mkdir()
        (folder / "vectors.npy").write_text("rows")
        kept = tmp_path / f"v{version}-keywords"
        kept.mkdir()
        for path in (index, folder, kept):
            os.utime(path, (1_000 + version, 1_000 + version))
    (tmp_path / "v2.duckdb").write_text("an index of the layout before")
    (tmp_path / "notes.txt").write_text("not a search file")
    search_index.prune(tmp_path, keep=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["notes.txt"]
        + [f"v{v}-{layout}.duckdb" for v in range(3, 7)]
        + [f"v{v}-vectors" for v in range(3, 7)]
        + [f"v{v}-keywords" for v in range(3, 7)]
    )
    assert (tmp_path / "v6-vectors" / "vectors.npy").read_text() == "rows"


def test_a_damaged_keyword_index_is_built_again(sample_run, caplog):
    """An index file that is not a database, or that lost cards, is built again with one
    warning, and searches as before."""
    settings = sample_run.settings
    with open_lake(settings) as con:
        path = search_index.keyword_index(con, settings)
        with contextlib.closing(duckdb.connect(str(path))) as index:
            index.execute(
                "delete from cards where paper_id in (select paper_id from cards limit 3)"
            )
        with caplog.at_level(logging.WARNING):
            assert search_index.keyword_index(con, settings) == path
        assert "35 cards where the version holds 38 papers" in caplog.text
        path.write_bytes(b"not a database")
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            search_index.keyword_index(con, settings)
        assert "built again" in caplog.text
        hits = read.search_papers(con, "SparseD sparse attention", settings, k=1, mode="keyword")
        assert "SparseD" in hits["abstract"][0]
