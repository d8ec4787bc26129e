"""Aggregate on tiny explicit vectors: exact neighbours, near-duplicates, topics, stats."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flows.core import cache
from flows.core.lake import connect, read_sql, staged
from flows.core.settings import Settings
from flows.derive import (
    build,
    duplicates,
    kept_lists,
    mentions,
    neighbour_lists,
    neighbours,
    paper_rows,
    topic_groups,
)
from flows.derive import terms as topic_terms
from flows.derive import topics as topic_model
from flows.derive.kept_lists import Lists, NeighbourLists
from tests.conftest import papers_frame


def unit(rows):
    v = np.asarray(rows, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


VECTORS = unit([[1, 0, 0], [0.99, 0.1, 0], [0, 1, 0], [0, 0.9, 0.1], [0.05, 0, 1]])
IDS = ["a", "b", "c", "d", "e"]
# What the tests of whole builds run with: 2 neighbours, pairs from 0.99, 3 topics.
TINY = Settings(neighbors_k=2, duplicate_threshold=0.99, n_topics=3, seed=7)


def brute_force(vectors, k):
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    return {i: list(np.argsort(-sims[i], kind="stable")[:k]) for i in range(len(vectors))}


def test_nearest_is_exact_and_excludes_self(monkeypatch):
    monkeypatch.setattr(neighbours, "BLOCK_ROWS", 2)  # several blocks on five rows
    top, pairs = neighbours.nearest(IDS, VECTORS, k=2, threshold=0.99)
    assert top.filter(pl.col("paper_id") == pl.col("neighbor_id")).height == 0
    expected = brute_force(VECTORS, 2)
    for i, pid in enumerate(IDS):
        got = top.filter(pl.col("paper_id") == pid).sort("score", descending=True)
        assert got["neighbor_id"].to_list() == [IDS[j] for j in expected[i]]
    assert sorted(pairs.select("paper_id", "neighbor_id").rows()) == [
        ("a", "b"),
        ("b", "a"),
        ("c", "d"),
        ("d", "c"),
    ]


def test_nearest_on_random_vectors_matches_brute_force(monkeypatch):
    monkeypatch.setattr(neighbours, "BLOCK_ROWS", 7)
    rng = np.random.default_rng(0)
    vectors = unit(rng.normal(size=(40, 16)))
    ids = [f"p{i:02d}" for i in range(40)]
    top, _ = neighbours.nearest(ids, vectors, k=5, threshold=0.99)
    expected = brute_force(vectors, 5)
    for i, pid in enumerate(ids):
        got = top.filter(pl.col("paper_id") == pid).sort("score", descending=True)
        assert got["neighbor_id"].to_list() == [ids[j] for j in expected[i]]


def clustered(n, dim=32, centres=20, seed=0):
    """Unit vectors around a few centres, shaped like embeddings of related abstracts."""
    rng = np.random.default_rng(seed)
    centre = rng.normal(size=(centres, dim))
    return unit(centre[rng.integers(0, centres, n)] + 0.6 * rng.normal(size=(n, dim)))


def test_hnsw_neighbours_agree_with_exact_and_are_repeatable():
    vectors = clustered(600)
    ids = [f"p{i:03d}" for i in range(600)]
    exact, exact_pairs = neighbours.nearest(ids, vectors, k=10, threshold=0.9, method="exact")
    graph, graph_pairs = neighbours.nearest(ids, vectors, k=10, threshold=0.9, method="hnsw")
    assert graph.filter(pl.col("paper_id") == pl.col("neighbor_id")).height == 0
    assert graph.group_by("paper_id").len()["len"].unique().to_list() == [10]
    found = set(graph.select("paper_id", "neighbor_id").rows())
    truth = set(exact.select("paper_id", "neighbor_id").rows())
    assert len(found & truth) / len(truth) >= 0.98
    # Scores are true cosines of the pairs found, not graph estimates.
    joined = graph.join(exact, on=["paper_id", "neighbor_id"], suffix="_exact")
    assert np.allclose(joined["score"], joined["score_exact"], atol=1e-5)
    pair = {tuple(sorted(r)) for r in graph_pairs.select("paper_id", "neighbor_id").rows()}
    assert pair == {tuple(sorted(r)) for r in exact_pairs.select("paper_id", "neighbor_id").rows()}
    again, _ = neighbours.nearest(ids, vectors, k=10, threshold=0.9, method="hnsw")
    assert again.equals(graph)


@pytest.mark.parametrize("method", ["exact", "hnsw", "ivf"])
def test_a_crowd_of_copies_keeps_each_papers_closest_pairs_and_one_group(monkeypatch, method):
    """Each paper keeps its PAIR_CAP closest pairs (exactly, also where the graph is
    crowded); every copy still lands in one group."""
    monkeypatch.setattr(neighbours, "PAIR_CAP", 4)
    rng = np.random.default_rng(1)
    base = rng.normal(size=16)
    copies = unit(base + 0.01 * rng.normal(size=(9, 16)))  # nine papers, all pairs ~1.0
    vectors = np.vstack([copies, clustered(50, dim=16, seed=2)])
    ids = [f"p{i:02d}" for i in range(len(vectors))]
    _, pairs = neighbours.nearest(ids, vectors, k=3, threshold=0.99, method=method)
    scores = copies @ copies.T
    for i in range(9):
        mine = pairs.filter(pl.col("paper_id") == ids[i])
        closest = [ids[j] for j in np.argsort(-scores[i]) if j != i][:4]
        assert sorted(mine["neighbor_id"].to_list()) == sorted(closest)
    groups = duplicates.group_pairs(pairs)
    assert groups["paper_id"].to_list() == ids[:9]
    assert set(groups["group_id"]) == {"p00"} and set(groups["group_size"]) == {9}


def test_auto_method_switches_to_the_kept_graph_above_the_exact_limit():
    assert neighbours.neighbor_method("auto", 20_000, 20_000) == "exact"
    assert neighbours.neighbor_method("auto", 20_001, 20_000) == "hnsw"
    assert neighbours.neighbor_method("exact", 10**6, 20_000) == "exact"
    assert neighbours.neighbor_method("hnsw", 10, 20_000) == "hnsw"
    with pytest.raises(ValueError, match="neighbour method must be one of auto, exact, hnsw, ivf"):
        neighbours.neighbor_method("annoy", 10, 20_000)
    top, pairs = neighbours.nearest([], np.zeros((0, 8), np.float32), 5, 0.9, method="hnsw")
    assert top.height == pairs.height == 0
    with pytest.raises(ValueError, match="neighbors_method must be auto, exact, hnsw or ivf"):
        Settings(neighbors_method="annoy")


def test_topics_are_seeded_and_numbered_by_size():
    first, centroids, _ = topic_model.cluster_topics(IDS, VECTORS, n_topics=3, seed=7)
    again, _, _ = topic_model.cluster_topics(IDS, VECTORS, n_topics=3, seed=7)
    assert first.equals(again)
    topic = dict(first.select("paper_id", "topic_id").rows())
    assert topic["a"] == topic["b"] and topic["c"] == topic["d"]
    assert len({topic["a"], topic["c"], topic["e"]}) == 3
    assert topic["e"] == 2  # the single-paper topic is the smallest
    assert centroids["topic_id"].to_list() == [0, 1, 2]
    assert topic_model.choose_topic_count(VECTORS, 10, seed=7) == 5  # no more topics than papers
    assert topic_model.choose_topic_count(VECTORS, None, seed=7) == 2  # sqrt(5 / 2), small n


def test_topic_ids_persist_across_versions():
    _, centroids, _ = topic_model.cluster_topics(IDS, VECTORS, n_topics=3, seed=7)
    previous = as_previous(centroids)
    # Relabel the old topics 10, 11, 12: the same clusters must come back with those ids.
    renamed = {t + 10: c for t, c in previous.items()}
    more = unit(np.vstack([VECTORS, [[0.98, 0.12, 0.01]]]))
    topics, _, _ = topic_model.cluster_topics(
        [*IDS, "f"], more, n_topics=3, seed=99, previous=renamed
    )
    topic = dict(topics.select("paper_id", "topic_id").rows())
    assert topic["f"] == topic["a"] == topic["b"]
    assert sorted(set(topic.values())) == [10, 11, 12]
    # A cluster that matches no old topic takes a fresh id above the old ones.
    assert topic_model.match_topics(
        unit([[0, 0, 1.0], [1.0, 1.0, 0]]), {7: np.array([0, 0, 1.0])}
    ) == {0: 7}


def test_mentions_with_reported_numbers():
    con = connect()
    papers = papers_frame(
        {
            "paper_id": ["p1", "p2"],
            "abstract": [
                "On ImageNet 256x256 we reach a state-of-the-art FID of 1.02 and beat CIFAR-100.",
                "We report pass@1 on HumanEval and accuracy = 91.5% on GSM8K; code is released.",
            ],
            "links": [[], [{"url": "https://github.com/a/b", "kind": "code"}]],
        }
    )
    con.register("papers_frame", papers)
    con.execute("create table papers as select * from papers_frame")
    mentions.stage_vocabulary(con)
    rows = con.execute(read_sql("mentions")).fetchall()
    found = {(r[0], r[1], r[2]): r[3] for r in rows}
    assert found == {
        ("p1", "dataset", "ImageNet"): None,
        ("p1", "dataset", "CIFAR-100"): None,
        ("p1", "metric", "FID"): "1.02",
        ("p2", "benchmark", "HumanEval"): None,
        ("p2", "benchmark", "GSM8K"): None,
        ("p2", "metric", "pass@k"): None,
        ("p2", "metric", "accuracy"): "91.5%",
        ("p2", "code", "https://github.com/a/b"): None,
    }


def test_mention_macros_compile_each_pattern_as_a_constant():
    """A pattern with a quote, and one given twice: each is one branch, read as written."""
    con = connect(extensions=())
    patterns = [r"\bO'Neil score\b", r"\bFID\b", r"\bFID\b"]
    text = mentions.mention_macros(patterns)
    assert text.count("when '\\bFID\\b' then") == 2  # one in each macro
    con.execute(text)
    abstract = "We report an O'Neil score of 71.5% and FID = 2.1 on faces."
    row = con.execute(
        "select mention_value(?, ?), mention_value(?, ?), mention_context(?, ?), "
        "mention_value('unknown', ?)",
        [patterns[0], abstract, patterns[1], abstract, patterns[1], abstract, abstract],
    ).fetchone()
    assert row == ("71.5%", "2.1", abstract, None)


def test_mentions_of_a_few_papers_compile_only_the_patterns_they_mention(monkeypatch):
    """The macros' two forms give the same mentions, numbers and contexts; a per-paper
    build over at most MACRO_ROWS_MAX papers runs with the form built from each row's
    pattern, over more with the constant one, which is defined again after either."""
    con = connect(extensions=())
    papers = corpus_papers(40).with_columns(
        abstract=pl.when(pl.col("paper_id") == "p01")
        .then(pl.lit("An O'Neil-style FID = 3.5 on ImageNet-21k; pass@1 of 40% on HumanEval."))
        .otherwise(pl.col("abstract"))
    )
    con.register("papers_frame", papers)
    con.execute("create table papers as select * from papers_frame")
    mentions.stage_vocabulary(con)
    constant = con.execute(read_sql("mentions")).fetchall()
    each_row = con.execute("select getvariable('macros_each_row')").fetchone()[0]
    assert "case pattern" not in each_row and "' || pattern || '" in each_row
    con.execute(each_row)
    assert con.execute(read_sql("mentions")).fetchall() == constant
    assert ("p01", "metric", "FID", "3.5") in [row[:4] for row in constant]
    assert len({row[2] for row in constant}) > 5

    def definition() -> str:
        return con.execute(
            "select macro_definition from duckdb_functions() where function_name = 'mention_value'"
        ).fetchone()[0]

    con.execute(con.execute("select getvariable('macros')").fetchone()[0])
    used = []
    over_papers = paper_rows.over_papers

    def spy(con, frame, sql):
        used.append((frame.height, "CASE" in definition().upper()))
        return over_papers(con, frame, sql)

    monkeypatch.setattr(paper_rows, "over_papers", spy)
    rows = paper_rows.PaperRows(con, None, "mentions", ("mention_vocabulary",), papers)
    few = rows.run_over(con, rows.papers.head(mentions.MACRO_ROWS_MAX))
    monkeypatch.setattr(paper_rows, "MACRO_ROWS_MAX", 10)
    many = rows.run_over(con, rows.papers)
    assert used == [(40, False), (40, True)]
    assert "CASE" in definition().upper()  # the constant form again
    assert few.sort(few.columns).equals(many.sort(many.columns)) and many.height > 40


def test_derived_tables_in_sql():
    abstracts = {
        "a": "Speculative decoding drafts a token; speculative decoding verifies tokens.",
        "b": "Speculative decoding with a tree draft verifies many tokens in parallel.",
        "c": "Protein folding predicts protein structure from sequences of residues.",
        "d": "Protein design generates sequences that fold into a target structure.",
        "e": "Weather forecasting with graph networks over the globe.",
    }
    papers = papers_frame(
        {
            "paper_id": IDS,
            "title": ["Drafts", "Trees", "Folding", "Design", "Weather"],
            "source_path": ["f.txt"] * 5,
            "record_no": [1, 2, 3, 4, 5],
            "line": [3, 5, 7, 9, 11],
            "venue": ["ICLR"] * 5,
            "year": [2026] * 5,
            "abstract": list(abstracts.values()),
            "word_count": [9, 11, 10, 11, 8],
            "links": [[{"url": "https://github.com/x/y", "kind": "code"}], [], [], [], []],
        }
    )
    embeddings = pl.DataFrame(
        {"paper_id": IDS, "embedding": pl.Series(VECTORS.tolist(), dtype=pl.List(pl.Float32))}
    )
    con = connect()
    con.execute("create table papers as select * from papers")
    con.execute(
        "create table sources as select 'f.txt' as path, 'blocks' as format, 'ICLR' as venue, "
        "2026 as year, 5 as records_seen, 5 as accepted, 0 as rejected, null as error"
    )
    con.execute("create table paper_sources as select paper_id, source_path, record_no from papers")
    counts = build.build_tables(con, papers, embeddings, TINY)
    assert counts["neighbors"] == 10
    assert counts["duplicates"] == 2
    assert con.execute("select paper_a, paper_b, kind from duplicates order by 1").fetchall() == [
        ("a", "b", "near"),
        ("c", "d", "near"),
    ]
    groups = "select group_id, paper_id, group_size, title from duplicate_groups order by 2"
    assert con.execute(groups).fetchall() == [
        ("a", "a", 2, "Drafts"),
        ("a", "b", 2, "Trees"),
        ("c", "c", 2, "Folding"),
        ("c", "d", 2, "Design"),
    ]
    labels = dict(con.execute("select topic_id, top_terms from topics").fetchall())
    topic_of = dict(con.execute("select paper_id, topic_id from paper_topics").fetchall())
    assert labels[topic_of["a"]][:4] == ["speculative decoding", "decoding", "draft", "speculative"]
    # Phrases label a topic, and their words are not said twice.
    label = dict(con.execute("select topic_id, label from topics").fetchall())
    assert label[topic_of["a"]] == "speculative decoding, draft, token"
    assert label[topic_of["e"]] == "graph networks, weather forecasting, globe"
    assert "protein" in labels[topic_of["c"]]
    # "tokens" and "token" fold into one term; stop words never label a topic.
    assert "tokens" not in labels[topic_of["a"]] and "with" not in labels[topic_of["a"]]
    stats = con.execute("select venue, papers, papers_with_code, topics from venue_stats")
    assert stats.fetchall() == [("ICLR", 5, 1, 3)]


def test_a_pair_just_above_the_threshold_is_stored_above_it():
    con = connect()
    con.execute(
        "create table papers as select * from (values ('a', 'f.txt', 1), ('b', 'f.txt', 2))"
        " t(paper_id, source_path, line)"
    )
    # 0.95000005 is the float32 just above 0.95; rounded to six places it would be stored as
    # the float32 just below.
    con.execute(
        "create table similar_pairs as select 'a' as paper_id, 'b' as neighbor_id, "
        "0.95000005::float as score"
    )
    con.execute(
        "create table pair_groups as select 'a' as paper_id, 'a' as group_id, 2 as group_size"
    )
    con.execute("set variable duplicate_threshold = 0.95")
    con.execute("set variable duplicate_group_max = 50")
    con.execute(f"create table duplicates as {read_sql('duplicates')}")
    (score,) = con.execute("select score from duplicates").fetchone()
    assert 0.95 <= score < 0.9500011


@pytest.mark.parametrize("new_among_old", [False, True])
def test_updating_last_runs_lists_equals_searching_again(new_among_old):
    """Exact lists updated for 100 new and 20 departed papers equal a fresh search, whether
    the new papers' ids sort after the old ones or among them (and among the old papers
    searched again)."""
    vectors = clustered(900, dim=24, seed=3)
    every = [f"p{i:04d}" for i in range(900)]
    vector_of = dict(zip(every, vectors, strict=True))
    came = [p for i, p in enumerate(every) if i % 9 == 4] if new_among_old else every[800:]
    before = [p for p in every if p not in came]
    gone = before[100:120]
    now = sorted(set(every) - set(gone))

    def matrix(ids):
        return np.stack([vector_of[p] for p in ids])

    previous = neighbours.candidates(before, matrix(before), 32, 0.8, "exact")
    whole = neighbours.candidates(now, matrix(now), 32, 0.8, "exact")
    # Kept trimmed: each list's top 10 and its rows at 0.8 or more (405 lists have more
    # than 10 such rows, 14 reach the width of 32).
    fresh = neighbours.trim_lists(whole, 10, 0.8)
    assert 880 * 10 < fresh.height < whole.height
    trimmed = neighbours.trim_lists(previous, 10, 0.8)
    updated = neighbour_lists.update_candidates(now, matrix(now), 32, trimmed, before, 10, 0.8)
    assert updated.height == fresh.height
    pairs = updated.join(fresh, on=["paper_id", "neighbor_id"], how="full", suffix="_fresh")
    assert pairs["score"].null_count() == pairs["score_fresh"].null_count() == 0
    assert np.allclose(pairs["score"], pairs["score_fresh"], atol=1e-6)
    assert not updated["neighbor_id"].is_in(gone).any()
    # Each paper's rows together and best first, as a new search gives them.
    runs = updated["paper_id"].rle()
    assert runs.struct.field("value").n_unique() == runs.len() == 880
    ranked = updated.sort(["paper_id", "score", "neighbor_id"], descending=[False, True, False])
    assert updated.sort("paper_id", maintain_order=True).equals(ranked)
    top, near = neighbours.split_candidates(updated, 10, 0.8)
    top_fresh, near_fresh = neighbours.split_candidates(whole, 10, 0.8)

    def ids(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.select("paper_id", "neighbor_id").sort("paper_id", maintain_order=True)

    assert ids(top).equals(ids(top_fresh)) and top.height == 8800
    assert ids(near).equals(ids(near_fresh))


def test_neighbour_lists_are_kept_per_model_width_k_and_threshold(tmp_path):
    found = pl.DataFrame({"paper_id": ["a", "b"], "neighbor_id": ["b", "a"], "score": [0.5, 0.5]})
    lists = NeighbourLists(tmp_path, "model:weights:fp32", 32, 10, 0.95)
    assert lists.load() is None
    lists.save(Lists.of(["a", "b", "c"], found))
    stored = lists.load()
    assert stored.frame().equals(found) and stored.ids.to_list() == ["a", "b", "c"]
    assert stored.rows.tolist() == [0, 1] and stored.cols.tolist() == [1, 0]
    model = "model:weights:fp32"
    others = [("model:other:fp32", 32, 10, 0.95), (model, 40, 10, 0.95), (model, 32, 12, 0.95),
              (model, 32, 10, 0.9)]  # fmt: skip
    for other in others:
        assert NeighbourLists(tmp_path, *other).load() is None


def test_lists_an_earlier_version_kept_by_id_are_read_once_then_kept_by_position(tmp_path):
    """A warehouse whose lists were kept as one file of ids (a row with no neighbour for a
    paper alone) is updated from them, not searched again; a damaged one is dropped."""
    lists = NeighbourLists(tmp_path, "model:weights:fp32", 32, 10, 0.95)
    named = pl.DataFrame(
        {"paper_id": ["b", "a", "a", "c"], "neighbor_id": ["a", "c", "b", None],
         "score": [0.5, 0.9, 0.5, None]}
    )  # fmt: skip
    cache.write_parquet(lists.named_lists, named)
    read = lists.load()
    assert read.ids.to_list() == ["a", "b", "c"]
    assert read.frame().rows() == [("a", "c", 0.9), ("a", "b", 0.5), ("b", "a", 0.5)]
    lists.save(read)
    assert not lists.named_lists.exists() and lists.load().frame().equals(read.frame())
    lists.drop()
    cache.write_parquet(lists.named_lists, named.with_columns(neighbor_id=pl.lit("z")))
    assert lists.load() is None and not lists.named_lists.exists()


def themes(centres: np.ndarray, per: int, seed: int, spread: float = 0.35) -> np.ndarray:
    """`per` unit vectors around each centre."""
    rng = np.random.default_rng(seed)
    points = np.repeat(centres, per, axis=0)
    return unit(points + spread * rng.normal(size=points.shape) / np.sqrt(centres.shape[1]))


def as_previous(centroids: pl.DataFrame) -> dict[int, np.ndarray]:
    """topic_centroids as a run carries them to the next (`publish.Previous.centroids`)."""
    return {t: np.asarray(c, dtype=np.float32) for t, c in centroids.iter_rows()}


def fitted(centres: int, fit: int, per: int, seed: int, old_seed: int):
    """`centres` random unit centres, an old corpus of `per` papers on each of the first
    `fit` (ids a000, a001, ...) and the `fit` topics seeded k-means gives it: the centres,
    the old vectors and ids, paper_topics, the fit's note and the topics carried over."""
    centre_rows = unit(np.random.default_rng(seed).normal(size=(centres, 64)))
    old = themes(centre_rows[:fit], per, seed=old_seed)
    old_ids = [f"a{i:03d}" for i in range(len(old))]
    topics, centroids, note = topic_model.cluster_topics(old_ids, old, fit, seed=42)
    return centre_rows, old, old_ids, topics, note, as_previous(centroids)


def test_a_new_dense_theme_becomes_a_new_topic_and_old_ids_persist():
    centres, old, old_ids, topics, note, previous = fitted(6, 5, 80, 0, 1)  # 400 papers
    assert note == "fit: 5 topics"
    new = themes(centres[5:], 40, seed=2)  # 40 papers on a theme no topic covers
    ids = old_ids + [f"b{i:03d}" for i in range(40)]
    grown, _, note = topic_model.cluster_topics(
        ids, np.vstack([old, new]), None, 42, previous, previous_papers=pl.Series(old_ids)
    )
    assert note.startswith("updated: 40 papers new") and note.endswith("1 new topics (40 papers)")
    before = dict(topics.select("paper_id", "topic_id").rows())
    after = dict(grown.select("paper_id", "topic_id").rows())
    assert all(after[p] == before[p] for p in old_ids)  # every old paper keeps its topic id
    assert {after[f"b{i:03d}"] for i in range(40)} == {5}  # the new theme: new id 5
    # Its label set grows by one; nothing else moves.
    assert sorted(grown["topic_id"].unique()) == [0, 1, 2, 3, 4, 5]
    # 40 new papers on the old themes form no topic: they join theirs.
    same = themes(centres[:5], 8, seed=6)
    ids = old_ids + [f"c{i:03d}" for i in range(40)]
    joined, _, note = topic_model.cluster_topics(
        ids, np.vstack([old, same]), None, 42, previous, previous_papers=pl.Series(old_ids)
    )
    assert note.endswith("0 new topics (0 papers)")
    after = dict(joined.select("paper_id", "topic_id").rows())
    assert all(after[p] == before[p] for p in old_ids)
    assert [after[f"c{i:03d}"] for i in range(0, 40, 8)] == [
        before[f"a{i:03d}"] for i in range(0, 400, 80)
    ]


def test_papers_that_fit_no_topic_gather_across_runs_into_a_new_topic():
    """Six papers on a new theme are too few for a topic and stay outliers; six more, in
    the next run, join them (`near_rows`): a topic of the twelve, with a new id."""
    centres, old, old_ids, _, _, previous = fitted(6, 5, 80, 0, 1)
    theme = themes(centres[5:], 12, seed=2)
    first, second = [f"b{i:03d}" for i in range(6)], [f"c{i:03d}" for i in range(6)]
    ids = old_ids + first
    _, centroids, note = topic_model.cluster_topics(
        ids, np.vstack([old, theme[:6]]), None, 42, previous, previous_papers=pl.Series(old_ids)
    )
    assert note.startswith("updated: 6 papers new") and note.endswith("0 new topics (0 papers)")
    grown, _, note = topic_model.cluster_topics(
        ids + second, np.vstack([old, theme]), None, 42, as_previous(centroids),
        previous_papers=pl.Series(ids),
    )  # fmt: skip
    assert note.startswith("updated: 6 papers new") and note.endswith("1 new topics (12 papers)")
    after = dict(grown.select("paper_id", "topic_id").rows())
    assert {after[p] for p in first + second} == {5}
    assert sorted(grown["topic_id"].unique()) == [0, 1, 2, 3, 4, 5]


def test_a_paper_keeps_its_topic_while_it_fits_there():
    """The last version put papers b and m in topic 1. b, between the two topics and a
    little nearer topic 0, still fits topic 1 and stays; m fits topic 1 no more (as when
    its text changed) and goes to its nearest topic, 0. Matched afresh, b goes to 0."""
    rng = np.random.default_rng(11)
    near = unit(rng.normal(size=(1, 64)))
    centres = np.vstack([near, unit(near + 0.3 * unit(rng.normal(size=(1, 64))))])
    old = themes(centres, 100, seed=12)
    old_ids = [f"a{i:03d}" for i in range(200)]
    topics, centroids, _ = topic_model.cluster_topics(old_ids, old, 2, seed=42)
    previous = as_previous(centroids)
    c0, c1 = (unit(previous[t][None])[0] for t in (0, 1))
    b, m = unit([1.05 * c0 + c1, c0 - 0.5 * c1])
    assert b @ c0 > b @ c1 > 0.95 and m @ c0 > m @ c1
    ids, vectors = [*old_ids, "b", "m"], np.vstack([old, b, m])
    given = topics.select("paper_id", "topic_id")
    given = pl.concat([given, pl.DataFrame({"paper_id": ["b", "m"], "topic_id": [1, 1]},
                                           schema=given.schema)])  # fmt: skip
    kept, _, note = topic_model.cluster_topics(
        ids, vectors, None, 42, previous, previous_papers=given["paper_id"],
        previous_assignments=given,
    )  # fmt: skip
    assert note.startswith("updated: 0 papers new")
    after = dict(kept.select("paper_id", "topic_id").rows())
    assert (after["b"], after["m"]) == (1, 0)
    assert all(after[p] == t for p, t in topics.select("paper_id", "topic_id").rows())
    afresh, _, _ = topic_model.cluster_topics(
        ids, vectors, None, 42, previous, previous_papers=given["paper_id"]
    )
    assert dict(afresh.select("paper_id", "topic_id").rows())["b"] == 0


def test_near_rows_are_the_new_papers_and_the_outliers_close_to_one():
    vectors = unit([[1, 0, 0], [0.9, 0.3, 0], [0, 0, 1], [0.2, 1, 0], [0, 1, 0.1]])
    fresh, outliers = np.array([0, 4]), np.array([1, 2, 3])
    assert topic_groups.near_rows(vectors, outliers, fresh, 0.9).tolist() == [0, 1, 3, 4]
    assert topic_groups.near_rows(vectors, outliers, fresh, 0.99).tolist() == [0, 4]
    assert topic_groups.near_rows(vectors, outliers, fresh[:0], 0.5).tolist() == []


def test_unrelated_papers_are_not_close_to_the_rest_of_their_group():
    """Ten orthogonal vectors: each has cosine 1/sqrt(10) to the mean of all ten, which
    holds it, and 0 to the mean of the other nine."""
    members = np.eye(10, 16, dtype=np.float32)
    centre = unit(members.mean(axis=0, keepdims=True))[0]
    assert np.isclose((members @ centre).mean(), 1 / np.sqrt(10))
    assert np.allclose(topic_groups.closeness_to_the_rest(members), 0.0, atol=1e-12)


def test_a_group_stands_apart_only_beyond_chance():
    """Ten papers each 0.05 closer to one another than to their old topic stand apart;
    the same mean gain spread over -0.45 to +0.55 does not, nor does a loss."""
    assert topic_groups.stands_apart(np.full(10, 0.05) + np.linspace(-0.01, 0.01, 10))
    assert not topic_groups.stands_apart(np.linspace(-0.45, 0.55, 10))
    assert not topic_groups.stands_apart(np.full(10, -0.05))
    assert not topic_groups.stands_apart(np.array([0.3]))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 40), seed=st.integers(0, 2**31 - 1))
def test_closeness_to_the_rest_is_each_papers_cosine_to_the_others_mean(n, seed):
    members = clustered(n, dim=16, centres=3, seed=seed)
    expected = [
        members[i].astype(np.float64) @ unit(np.delete(members, i, axis=0).astype(
            np.float64).sum(axis=0, keepdims=True))[0]
        for i in range(n)
    ]  # fmt: skip
    assert np.allclose(topic_groups.closeness_to_the_rest(members), expected, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 120),
    centres=st.integers(1, 8),
    distance=st.floats(0.05, 1.2),
    copies=st.integers(0, 10),
    seed=st.integers(0, 2**32 - 1),
)
def test_average_linkage_groups_as_scikit_learn(n, centres, distance, copies, seed):
    """`average_linkage` puts rows together exactly as scikit-learn's average-linkage
    clustering by cosine with the same distance threshold, copies of a row included."""
    from sklearn.cluster import AgglomerativeClustering

    rows = clustered(n, dim=16, centres=centres, seed=seed % 2**31)
    rows = np.vstack([rows, rows[: min(copies, n)]])  # exact copies: distance 0

    def partition(labels):
        return sorted(sorted(np.flatnonzero(labels == label)) for label in np.unique(labels))

    expected = AgglomerativeClustering(
        n_clusters=None, metric="cosine", linkage="average", distance_threshold=distance
    ).fit(rows)
    assert partition(topic_groups.average_linkage(rows, distance)) == partition(expected.labels_)
    parts = topic_groups.linked_parts(rows, distance)
    grouped = topic_groups.average_linkage(rows, distance, parts)
    assert partition(grouped) == partition(expected.labels_)


def test_linked_parts_join_rows_through_near_pairs_across_blocks():
    """Two themes of 1,000 and 2,000 rows no pair of which lies near, bridged by one row
    near both (in the second block of 2,048 rows), are one part; a third theme is another."""
    rng = np.random.default_rng(5)
    axes = np.eye(3, 16)
    rows = np.vstack([
        unit(axes[0] + 0.01 * rng.normal(size=(1000, 16))),
        unit(axes[1] + 0.01 * rng.normal(size=(1500, 16))),
        unit(axes[:2].sum(axis=0, keepdims=True)),  # row 2,500: cosine 0.71 to both
        unit(axes[1] + 0.01 * rng.normal(size=(499, 16))),
        unit(axes[2] + 0.01 * rng.normal(size=(100, 16))),
    ])  # fmt: skip
    parts = topic_groups.linked_parts(rows, 0.35)
    assert len(set(parts[:3000])) == 1 and len(set(parts[3000:])) == 1
    assert parts[0] != parts[3000]
    apart = topic_groups.linked_parts(np.delete(rows, 2500, axis=0), 0.35)
    assert len({apart[0], apart[1000], apart[2999]}) == 3


def test_the_grouping_limit_cuts_a_large_linked_part_instead_of_refitting(monkeypatch):
    """Above LINKED_PARTS_ROWS open papers they are grouped part by part; a part of more
    than TOPIC_OUTLIERS_MAX is cut into pieces (`cut_parts`), and topics are not re-fit.
    Two new themes joined in one part by a chain of papers between them are cut apart and
    become the same two topics as when the part is grouped whole; old papers keep theirs."""
    centres, old, old_ids, topics, _, previous = fitted(7, 5, 80, 0, 1)
    steps = [(1 - t) * centres[5] + t * centres[6] for t in (0.2, 0.4, 0.6, 0.8)]
    new = np.vstack([
        themes(centres[5:6], 15, seed=2, spread=0.25),
        unit(steps),  # each about 0.95 to the next: one linked part of 34
        themes(centres[6:], 15, seed=7, spread=0.25),
    ])  # fmt: skip
    ids = old_ids + [f"b{i:03d}" for i in range(len(new))]
    sizes = []
    grouped = topic_groups.linkage_groups

    def counted(rows, distance):
        sizes.append(len(rows))
        return grouped(rows, distance)

    monkeypatch.setattr(topic_groups, "linkage_groups", counted)
    monkeypatch.setattr(topic_groups, "LINKED_PARTS_ROWS", 5)
    runs = {}
    for limit in (40, 20):
        monkeypatch.setattr(topic_groups, "TOPIC_OUTLIERS_MAX", limit)
        sizes.clear()
        assigned, _, note = topic_model.cluster_topics(
            ids, np.vstack([old, new]), None, 42, previous, previous_papers=pl.Series(old_ids)
        )
        after = dict(assigned.select("paper_id", "topic_id").rows())
        assert all(after[p] == t for p, t in topics.select("paper_id", "topic_id").rows())
        runs[limit] = (list(sizes), note, [after[p] for p in ids[len(old_ids) :]])
    assert runs[40][0] == [34] and sorted(runs[20][0]) == [17, 17]
    assert (
        runs[20][1]
        == runs[40][1]
        == "updated: 34 papers new, 36 fit no topic; 2 new topics (34 papers)"
    )
    new_topics = runs[20][2]
    assert new_topics == runs[40][2]
    assert set(new_topics[:15]) == {5} and set(new_topics[-15:]) == {6}


def test_cut_parts_keeps_pieces_within_the_limit_and_apart_from_other_parts():
    """Parts within the limit stay whole; a larger one is cut until no piece holds more,
    each piece within one part; copies of one row, which k-means cannot tell apart, are
    cut too; the same rows are cut the same way."""
    rows = np.vstack(
        [clustered(50, dim=16, centres=3, seed=1), np.repeat(unit([[1] + [0] * 15]), 30, 0)]
    )
    parts = np.array([0] * 50 + [1] * 30)
    pieces = topic_groups.cut_parts(rows, parts, 12)
    counts = np.bincount(pieces)
    assert counts.max() <= 12 and counts[counts > 0].sum() == 80
    for piece in np.unique(pieces):
        assert len(set(parts[pieces == piece])) == 1
    assert np.array_equal(pieces, topic_groups.cut_parts(rows, parts, 12))
    assert np.array_equal(topic_groups.cut_parts(rows, parts, 50), parts)
    copies = pieces[50:]
    assert len(np.unique(copies)) >= 3


def test_a_topic_keeps_its_centroid_while_its_papers_mean_stays_near_it():
    rng = np.random.default_rng(7)
    centres = unit(rng.normal(size=(3, 64)))
    old = themes(centres, 200, seed=8)  # 600 papers on 3 themes
    old_ids = [f"a{i:03d}" for i in range(600)]
    topics, centroids, _ = topic_model.cluster_topics(old_ids, old, 3, seed=42)
    previous = as_previous(centroids)
    # Two papers join one topic: every old paper's row is the same, bit for bit.
    new = themes(centres[:1], 2, seed=9)
    ids = old_ids + ["b000", "b001"]
    grown, grown_centroids, note = topic_model.cluster_topics(
        ids, np.vstack([old, new]), None, 42, previous, previous_papers=pl.Series(old_ids)
    )
    assert note.startswith("updated: 2 papers new")
    assert grown.filter(pl.col("paper_id").is_in(old_ids)).equals(topics)
    assert grown_centroids.equals(centroids)
    # A held centroid 1 degree from its papers' mean stays; one 3 degrees off follows them.
    labels = np.zeros(200, np.int64)
    mean = unit(old[:200].mean(axis=0, keepdims=True))[0]
    side = unit((centres[1] - (centres[1] @ mean) * mean)[None])[0]
    for degrees, stays in ((1.0, True), (3.0, False)):
        angle = np.radians(degrees)
        held = (np.cos(angle) * mean + np.sin(angle) * side).astype(np.float32)
        frame, made = topic_model.topic_frames(old_ids[:200], old[:200], labels, {0: 0}, {0: held})
        centroid = np.asarray(made["centroid"][0], dtype=np.float32)
        assert np.array_equal(centroid, held) is stays
        assert np.allclose(centroid, held if stays else mean, atol=1e-6)
        expected = 1.0 - old[:200].astype(np.float64) @ centroid.astype(np.float64)
        assert np.allclose(frame["distance"].to_numpy(), expected, atol=1e-6)


def test_topics_drift_or_a_request_refit_them():
    centres, old, old_ids, _, _, previous = fitted(8, 4, 60, 3, 4)
    new = themes(centres[4:], 40, seed=5)  # 160 papers, 40% of the corpus, fit no topic
    ids = old_ids + [f"b{i:03d}" for i in range(160)]
    _, _, note = topic_model.cluster_topics(ids, np.vstack([old, new]), None, 42, previous)
    assert note.startswith("re-fit: more than 25% of papers fit no old topic (drift)")
    _, _, asked = topic_model.cluster_topics(old_ids, old, None, 42, previous, refit=True)
    assert asked.startswith("re-fit on request")


def labels_of(terms: dict[int, list[str]]) -> list[tuple[int, str]]:
    """sql/topics.sql's labels of topics 0, 1, ... with these terms (best first), a paper
    each."""
    con = connect()
    rows = [(t, term, rank) for t, ranked in terms.items() for rank, term in enumerate(ranked, 1)]
    con.execute("create table topic_terms (topic_id int, term varchar, term_rank int)")
    con.executemany("insert into topic_terms values (?, ?, ?)", rows)
    con.execute(
        "create table paper_topics as select range::varchar as paper_id, "
        f"range::int as topic_id, 0.1 as distance from range({len(terms)})"
    )
    con.execute("create table topic_centroids (topic_id int, centroid float[])")
    return con.execute(f"select topic_id, label from ({read_sql('topics')})").fetchall()


def test_two_topics_never_read_the_same():
    """Terms "breast, cancer, imputation" and "cancer, breast, imputation" once labelled two
    topics; the second now takes a fourth term."""
    labels = labels_of({
        0: ["breast", "cancer", "imputation", "screening"],
        1: ["cancer", "breast", "imputation", "survival"],
        2: ["breast cancer", "breast", "tumour", "cancer", "risk"],
    })  # fmt: skip
    assert labels == [
        (0, "breast, cancer, imputation"),
        (1, "cancer, breast, imputation, survival"),
        (2, "breast cancer, tumour, risk"),
    ]


def test_labels_stay_unique_when_many_topics_share_their_terms():
    """Four topics on one theme, as k-means splits a large one: the first three terms of
    each are one set, and topics 1 and 2 share their fourth too (both read "cancer, breast,
    imputation, survival" once). Each takes the fewest terms, up to five, whose set no
    smaller id could read; topic 3, whose five terms are topic 0's, adds its id. A topic
    whose terms are its own (4) keeps three."""
    labels = labels_of({
        0: ["breast", "cancer", "imputation", "screening", "risk"],
        1: ["cancer", "breast", "imputation", "survival", "cohort"],
        2: ["imputation", "cancer", "breast", "survival", "trial"],
        3: ["breast", "cancer", "imputation", "screening", "risk"],
        4: ["graph networks", "weather", "globe"],
    })  # fmt: skip
    assert labels == [
        (0, "breast, cancer, imputation"),
        (1, "cancer, breast, imputation, survival"),
        (2, "imputation, cancer, breast, survival, trial"),
        (3, "breast, cancer, imputation (topic 3)"),
        (4, "graph networks, weather, globe"),
    ]


def test_stop_words_are_scikit_learns_without_importing_it():
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    assert topic_terms.english_stop_words() == ENGLISH_STOP_WORDS
    assert len(topic_terms.english_stop_words()) == 318


def test_top_k_is_each_rows_highest_scores_highest_first():
    rng = np.random.default_rng(7)
    block = rng.standard_normal((50, 40)).astype(np.float32)
    cols, scores = neighbours.top_k(block, 5)
    expected = np.sort(block, axis=1)[:, ::-1][:, :5]
    assert np.array_equal(scores, expected)
    assert np.array_equal(np.take_along_axis(block, cols, axis=1), expected)
    every, _ = neighbours.top_k(block, 40)  # k as wide as the block
    assert sorted(every[0].tolist()) == list(range(40))


SENTENCES = (
    "On ImageNet we reach an FID of 1.02 with a small diffusion model.",
    "We report pass@1 on HumanEval and accuracy = 91.5% on GSM8K.",
    "Speculative decoding drafts tokens that a larger model verifies.",
    "Protein folding predicts structures from sequences of residues.",
    "Graph networks forecast the weather over the globe.",
    "Results on CIFAR-100 and MMLU show consistent gains.",
    "Our models learn representations that transfer across tasks.",
    "The benchmark exposes failures of retrieval augmented generation.",
)


def corpus_papers(n: int, seed: int = 0) -> pl.DataFrame:
    """n papers of 2-4 of SENTENCES each, every third with a code link."""
    rng = np.random.default_rng(seed)
    abstracts = [
        " ".join(SENTENCES[j] for j in rng.choice(len(SENTENCES), rng.integers(2, 5), False))
        for _ in range(n)
    ]
    return papers_frame(
        {
            "paper_id": [f"p{i:02d}" for i in range(n)],
            "title": [f"Paper {i}" for i in range(n)],
            "source_path": ["f.txt"] * n,
            "record_no": list(range(1, n + 1)),
            "line": list(range(1, n + 1)),
            "venue": ["ICLR"] * n,
            "year": [2026] * n,
            "abstract": abstracts,
            "word_count": [len(a.split()) for a in abstracts],
            "links": [
                [{"url": f"https://github.com/x/p{i}", "kind": "code"}] if i % 3 == 0 else []
                for i in range(n)
            ],
        }
    )


def aggregated(papers: pl.DataFrame, cache=None) -> dict[str, list[tuple]]:
    """mentions and topic_terms of `papers` (fixed random vectors), sorted."""
    rng = np.random.default_rng(1)
    vectors = unit(rng.normal(size=(40, 8)))
    rows = [int(p[1:]) for p in papers["paper_id"]]
    embeddings = pl.DataFrame(
        {"paper_id": papers["paper_id"], "embedding": vectors[rows].tolist()},
        schema={"paper_id": pl.String, "embedding": pl.List(pl.Float32)},
    )
    con = connect(extensions=())
    con.execute("create table papers as select * from papers")
    con.execute(
        "create table sources as select 'f.txt' as path, 'blocks' as format, 'ICLR' as venue, "
        "2026 as year, 0 as records_seen, 0 as accepted, 0 as rejected, null as error"
    )
    con.execute("create table paper_sources as select paper_id, source_path, record_no from papers")
    build.build_tables(con, papers, embeddings, TINY, cache=cache)
    return {t: sorted(con.table(t).fetchall()) for t in ("mentions", "topic_terms")}


def papers_read(monkeypatch) -> list[list[str]]:
    """The papers each PaperRows build runs its SQL over from now on, a list per build."""
    read: list[list[str]] = []
    run_over = paper_rows.PaperRows.run_over

    def spy(self, con, papers):
        read.append(sorted(papers["paper_id"]))
        return run_over(self, con, papers)

    monkeypatch.setattr(paper_rows.PaperRows, "run_over", spy)
    return read


def test_mentions_and_topic_words_are_computed_for_new_papers_only(tmp_path, monkeypatch):
    """With the cache, a run reads only papers it has not seen (or whose text changed), and
    its tables equal a build from scratch, row for row."""
    every = corpus_papers(40)
    before = every.head(30)
    aggregated(before, tmp_path)
    # p03 and p07 left, p30-p39 came, p05 came back with a changed abstract (same id).
    now = every.filter(~pl.col("paper_id").is_in(["p03", "p07"])).with_columns(
        abstract=pl.when(pl.col("paper_id") == "p05")
        .then(pl.lit("On imagenet and MMLU we report accuracy = 80.1%."))
        .otherwise(pl.col("abstract"))
    )
    read = papers_read(monkeypatch)
    incremental = aggregated(now, tmp_path)
    fresh = [["p05", *(f"p{i}" for i in range(30, 40))]] * 2
    assert read == fresh  # the words of topic terms, then mentions
    monkeypatch.undo()
    scratch = aggregated(now)
    assert incremental == scratch
    p05 = {(kind, name): value for paper, kind, name, value, _ in scratch["mentions"]
           if paper == "p05"}  # fmt: skip
    assert p05 == {("benchmark", "MMLU"): None, ("metric", "accuracy"): "80.1%"}
    # Papers left: the cache holds the current papers only, those without mentions too,
    # each kind of rows in one whole file.
    held = [*tmp_path.glob("*/*.parquet"), *tmp_path.glob("*.parquet")]
    for path in held:
        cached = pl.read_parquet(path)["paper_id"].drop_nulls().unique().sort().to_list()
        assert cached == now["paper_id"].sort().to_list(), path.name
    assert sorted(p.name for p in held if p.parent != tmp_path) == ["whole-000002.parquet"] * 2
    assert len(held) == 3  # tokens, mentions, term counts


def test_the_cache_of_per_paper_rows_is_keyed_by_the_macros_defined(tmp_path, monkeypatch):
    """An edit of sql/macros/mentions.sql (here, a comment added) reads every paper again;
    the same macros read none."""
    papers = corpus_papers(12)
    aggregated(papers, tmp_path)
    read = papers_read(monkeypatch)
    aggregated(papers, tmp_path)
    assert read == [[], []]
    edited = mentions.mention_macros
    monkeypatch.setattr(
        mentions, "mention_macros", lambda p, **form: edited(p, **form) + "\n-- edited"
    )
    aggregated(papers, tmp_path)
    assert read[2:] == [papers["paper_id"].sort().to_list()] * 2


def test_a_run_that_only_adds_papers_adds_a_part_to_the_cache(tmp_path, monkeypatch):
    """Papers only added: their rows go in a new part beside the old ones (nothing held is
    rewritten), and the tables equal a build from scratch; PaperRows.PARTS_MAX parts are
    joined into one whole, and a run that drops a paper rewrites the whole too."""
    every = corpus_papers(40)
    monkeypatch.setattr(paper_rows.PaperRows, "PARTS_MAX", 3)

    def files() -> list[list[str]]:
        folders = sorted(f for f in tmp_path.iterdir() if f.is_dir())
        return [sorted(p.name for p in folder.glob("*.parquet")) for folder in folders]

    assert aggregated(every.head(25), tmp_path) == aggregated(every.head(25))
    assert files() == [["part-000001.parquet"]] * 2
    first = [sorted(f.stat().st_mtime_ns for f in d.glob("*")) for d in tmp_path.iterdir()
             if d.is_dir()]  # fmt: skip
    assert aggregated(every.head(30), tmp_path) == aggregated(every.head(30))
    assert files() == [["part-000001.parquet", "part-000002.parquet"]] * 2
    again = [sorted(f.stat().st_mtime_ns for f in d.glob("part-000001*")) for d in
             tmp_path.iterdir() if d.is_dir()]  # fmt: skip
    assert again == first  # the first part was not written again
    assert aggregated(every.head(30), tmp_path) == aggregated(every.head(30))
    assert len(files()[0]) == 2  # nothing new: nothing written
    assert aggregated(every.head(35), tmp_path) == aggregated(every.head(35))
    assert files() == [["part-000001.parquet", "part-000002.parquet", "part-000003.parquet"]] * 2
    assert aggregated(every.head(40), tmp_path) == aggregated(every.head(40))
    assert files() == [["whole-000004.parquet"]] * 2
    for folder in (f for f in tmp_path.iterdir() if f.is_dir()):
        held = pl.read_parquet(folder / "whole-000004.parquet")
        assert held.filter(pl.col("digest").is_not_null())["paper_id"].sort().to_list() == (
            every["paper_id"].sort().to_list()
        )
    dropped = every.filter(pl.col("paper_id") != "p04")
    assert aggregated(dropped, tmp_path) == aggregated(dropped)
    assert files() == [["whole-000005.parquet"]] * 2


def test_many_new_papers_are_read_and_written_a_batch_at_a_time(tmp_path, monkeypatch):
    """A run that reads many papers (the first) runs each per-paper SQL over BATCH_PAPERS
    papers at a time and writes each batch's rows to the part as they come (a row group
    each, then the papers' digests): the tables equal a build from scratch, and so do
    the next run's, which adds papers, and the one after, which rewrites the whole."""
    import pyarrow.parquet as pq

    every = corpus_papers(40)
    monkeypatch.setattr(paper_rows, "BATCH_PAPERS", 7)
    read = papers_read(monkeypatch)
    assert aggregated(every.head(25), tmp_path) == aggregated(every.head(25))
    ids = every["paper_id"].head(25).sort().to_list()
    batches = [ids[:7], ids[7:14], ids[14:21], ids[21:]]
    assert read[:8] == batches * 2  # the words of topic terms, then mentions
    for folder in (f for f in tmp_path.iterdir() if f.is_dir()):
        part = folder / "part-000001.parquet"
        assert pq.ParquetFile(part).metadata.num_row_groups == 5
        held = pl.read_parquet(part)
        assert held.filter(pl.col("digest").is_not_null())["paper_id"].sort().to_list() == ids
        assert set(held.filter(pl.col("digest").is_null())["paper_id"]) <= set(ids)
        cache.verify(part)
    assert aggregated(every.head(33), tmp_path) == aggregated(every.head(33))
    dropped = every.filter(pl.col("paper_id") != "p04")
    assert aggregated(dropped, tmp_path) == aggregated(dropped)
    # The whole, streamed from the parts and the new rows, is all that is left.
    for folder in (f for f in tmp_path.iterdir() if f.is_dir()):
        names = sorted(p.name for p in folder.iterdir())
        assert names == ["whole-000003.parquet", "whole-000003.parquet.seal"], names
        cache.verify(folder / "whole-000003.parquet")


def topic_terms_of(abstracts: dict[str, str], topics: dict[str, int], cache=None):
    """topic_terms and term_counts of papers with these abstracts and topics, sorted."""
    papers = papers_frame(
        {"paper_id": list(abstracts), "abstract": list(abstracts.values()),
         "links": [[] for _ in abstracts]},
        schema={"paper_id": pl.String, "abstract": pl.String,
                "links": pl.List(pl.Struct({"url": pl.String, "kind": pl.String}))},
    )  # fmt: skip
    assigned = pl.DataFrame(
        {"paper_id": list(topics), "topic_id": list(topics.values())},
        schema={"paper_id": pl.String, "topic_id": pl.Int32},
    )
    con = staged({"papers": papers, "paper_topics": assigned, "stopwords": topic_terms.stopwords()})
    con.execute(f"set variable topic_terms = {topic_terms.TOPIC_TERMS}")
    topic_terms.count_topic_terms(con, cache, assigned, papers)
    terms = con.execute(f"select * from ({read_sql('topic_terms')}) order by all").fetchall()
    return terms, sorted(con.table("term_counts").fetchall())


def reference_topic_terms(abstracts: dict[str, str], topics: dict[str, int]) -> list[tuple]:
    """topic_terms by its definition, in Python: plurals fold where the singular occurs,
    a term counts once per paper, weight = docs / topic size * ln(N / df)."""
    import math
    import re

    stop = set(topic_terms.stopwords()["word"])
    kept = {
        paper: [
            (position, word)
            for position, word in enumerate(
                re.findall(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*", abstracts[paper].lower()), 1
            )
            if len(word) >= 3 and word not in stop
        ]
        for paper in topics
    }
    vocabulary = {word for words in kept.values() for _, word in words}

    def fold(word: str) -> str:
        plural = word.endswith("s") and not word.endswith("ss") and word[:-1] in vocabulary
        return word[:-1] if plural else word

    docs: dict[tuple[int, str], int] = {}
    for paper, words in kept.items():
        at = {position: fold(word) for position, word in words}
        terms = set(at.values()) | {
            f"{term} {at[p + 1]}" for p, term in at.items() if at.get(p + 1, term) != term
        }
        for term in terms:
            docs[topics[paper], term] = docs.get((topics[paper], term), 0) + 1
    df: dict[str, int] = {}
    for (_, term), count in docs.items():
        df[term] = df.get(term, 0) + count
    sizes = {t: list(topics.values()).count(t) for t in set(topics.values())}
    ranked: dict[int, list] = {}
    for (topic, term), count in docs.items():
        weight = count / sizes[topic] * math.log(len(topics) / df[term])
        if count >= min(2, sizes[topic]) and weight > 0:
            ranked.setdefault(topic, []).append((-weight, " " not in term, term, count))
    rows = []
    for topic, entries in ranked.items():
        for rank, (weight, _, term, count) in enumerate(sorted(entries)[: topic_terms.TOPIC_TERMS]):
            rows.append((topic, term, count, df[term], round(-weight, 6), rank + 1))
    return sorted(rows)


@settings(max_examples=60, deadline=None)
@given(
    counts=st.dictionaries(
        st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", "c", "d", "a b", "b c", "c d"])),
        st.integers(1, 4),
        min_size=1,
    ),
    extra=st.integers(0, 6),
    top=st.integers(1, 4),
)
def test_topic_terms_rank_each_topics_heaviest_terms_phrases_first_at_equal_weight(
    counts, extra, top
):
    """topic_terms over given counts: each topic's `top` heaviest terms by docs / topic size
    * ln(N / df), a phrase before a word and then by term at equal weight; many weights tie
    here, at the cut too."""
    import math

    sizes = {t: max(d for (topic, _), d in counts.items() if topic == t) for t, _ in counts}
    sizes = {t: size + extra * (t % 2) for t, size in sizes.items()}
    topics = [(f"p{t}-{i}", t) for t, size in sizes.items() for i in range(size)]
    con = connect()
    con.execute("create table paper_topics (paper_id varchar, topic_id integer)")
    con.executemany("insert into paper_topics values (?, ?)", topics)
    con.execute("create table term_counts (topic_id integer, term varchar, docs bigint)")
    con.executemany("insert into term_counts values (?, ?, ?)",
                    [(t, term, d) for (t, term), d in counts.items()])  # fmt: skip
    con.execute(f"set variable topic_terms = {top}")
    got = con.execute(f"select * from ({read_sql('topic_terms')}) order by all").fetchall()
    df: dict[str, int] = {}
    for (_, term), d in counts.items():
        df[term] = df.get(term, 0) + d
    ranked: dict[int, list] = {}
    for (t, term), d in counts.items():
        weight = d / sizes[t] * math.log(len(topics) / df[term])
        if d >= min(2, sizes[t]) and weight > 0:
            ranked.setdefault(t, []).append((-weight, " " not in term, term, d))
    expected = [
        (t, term, d, df[term], round(-w, 6), rank + 1)
        for t, rows in ranked.items()
        for rank, (w, _, term, d) in enumerate(sorted(rows)[:top])
    ]
    assert [row[:4] + row[5:] for row in got] == [row[:4] + row[5:] for row in sorted(expected)]
    assert [row[4] for row in got] == pytest.approx([row[4] for row in sorted(expected)])


def test_topic_terms_follow_papers_that_came_left_moved_or_changed(tmp_path, monkeypatch):
    """Counts kept in the cache and brought up to date from the papers that changed give
    the rows of counting every paper again, and of the definition; only those papers'
    tokens are read."""
    papers = corpus_papers(40)
    abstracts = dict(zip(papers["paper_id"], papers["abstract"], strict=True))
    before = {p: i % 3 for i, p in enumerate(list(abstracts)[:30])}
    topic_terms_of({p: abstracts[p] for p in before}, before, tmp_path)
    # p03 and p07 left, p30-p34 came, p11 moved from topic 2 to 0, p05 has a new text.
    now = {p: t for p, t in before.items() if p not in ("p03", "p07")}
    now |= {f"p{i}": i % 3 for i in range(30, 35)} | {"p11": 0}
    texts = {p: abstracts[p] for p in now} | {"p05": SENTENCES[2] + " " + SENTENCES[6]}
    changed: list[pl.DataFrame] = []
    changed_tokens = topic_terms.changed_tokens

    def spy(*args):
        changed.append(changed_tokens(*args))
        return changed[-1]

    monkeypatch.setattr(topic_terms, "changed_tokens", spy)
    incremental = topic_terms_of(texts, now, tmp_path)
    monkeypatch.undo()
    read = {
        side: sorted(changed[-1].filter(pl.col("side") == side)["paper_id"].unique())
        for side in (-1, 0, 1)
    }
    # p11 only moved: its tokens are read once, for both topics.
    assert read == {
        -1: ["p03", "p05", "p07"],
        0: ["p11"],
        1: ["p05", "p30", "p31", "p32", "p33", "p34"],
    }
    assert changed[-1].filter(pl.col("side") == 0).select(
        "topic_before", "topic_after"
    ).unique().rows() == [(2, 0)]
    assert incremental == topic_terms_of(texts, now)
    terms = incremental[0]
    assert [row[:4] + row[5:] for row in terms] == [
        row[:4] + row[5:] for row in reference_topic_terms(texts, now)
    ]
    assert [row[4] for row in terms] == pytest.approx(
        [row[4] for row in reference_topic_terms(texts, now)], abs=1e-6
    )
    # A second update starts from the counts the first left.
    later = {p: t for p, t in now.items() if p != "p30"} | {"p35": 1, "p12": 2}
    texts = {p: abstracts[p] for p in later} | {"p05": texts["p05"]}
    assert topic_terms_of(texts, later, tmp_path) == topic_terms_of(texts, later)
    # Without the tokens the counts were made from, everything is counted again.
    for path in tmp_path.glob("aggregate-paper_tokens-*"):
        shutil.rmtree(path)
    later = {p: t for p, t in later.items() if p != "p12"}
    texts = {p: texts[p] for p in later}
    assert topic_terms_of(texts, later, tmp_path) == topic_terms_of(texts, later)


def test_topic_terms_counted_in_batches_equal_one_count_and_the_definition(tmp_path, monkeypatch):
    """Changed papers counted a few at a time (BATCH_PAPERS) give the counts of counting
    them at once, cold and after papers came, left, moved or changed text; every batch
    reads its own papers' tokens only."""
    papers = corpus_papers(40)
    abstracts = dict(zip(papers["paper_id"], papers["abstract"], strict=True))
    before = {p: i % 3 for i, p in enumerate(list(abstracts)[:30])}
    now = {p: t for p, t in before.items() if p not in ("p03", "p07")}
    now |= {f"p{i}": i % 3 for i in range(30, 35)} | {"p11": 0}
    texts = {p: abstracts[p] for p in now} | {"p05": SENTENCES[2] + " " + SENTENCES[6]}
    whole_cold = topic_terms_of({p: abstracts[p] for p in before}, before)
    whole_now = topic_terms_of(texts, now)
    batches: list[list[str]] = []
    changed_tokens = topic_terms.changed_tokens

    def spy(tokens, papers):
        batches.append(sorted(papers["paper_id"]))
        read = changed_tokens(tokens, papers)
        assert set(read["paper_id"]) <= set(papers["paper_id"])
        return read

    monkeypatch.setattr(topic_terms, "BATCH_PAPERS", 4)
    monkeypatch.setattr(topic_terms, "changed_tokens", spy)
    assert topic_terms_of({p: abstracts[p] for p in before}, before, tmp_path) == whole_cold
    # Cold: 30 papers in batches of 4, counted twice (the vocabulary, then the terms).
    assert [len(b) for b in batches] == [4] * 7 + [2] + [4] * 7 + [2]
    batches.clear()
    assert topic_terms_of(texts, now, tmp_path) == whole_now
    assert len(batches) > 2 and max(len(b) for b in batches) <= 4
    terms = whole_now[0]
    assert [row[:4] + row[5:] for row in terms] == [
        row[:4] + row[5:] for row in reference_topic_terms(texts, now)
    ]


def test_a_new_papers_singular_folds_the_plurals_of_old_papers(tmp_path):
    """Old papers say "models" only; a paper that brings "model" folds their "models" and
    "language models" into "model" and "language model", and taking it away unfolds them."""
    old = {
        "a": "Large language models follow instructions.",
        "b": "Language models answer questions about tables.",
        "c": "Vision transformers classify images.",
        "d": "Vision transformers segment images.",
    }
    topics = {"a": 0, "b": 0, "c": 1, "d": 1}
    first = topic_terms_of(old, topics, tmp_path)[1]
    assert (0, "models", 2) in first and (0, "language models", 2) in first
    new = old | {"e": "A language model writes code."}
    grown = topics | {"e": 0}
    terms, counts = topic_terms_of(new, grown, tmp_path)
    assert (terms, counts) == topic_terms_of(new, grown)
    assert (0, "model", 3) in counts and (0, "language model", 3) in counts
    assert not [row for row in counts if row[1] in ("models", "language models")]
    assert [row[1:4] for row in terms if row[0] == 0 and "model" in row[1]] == [
        ("language model", 3, 3),
        ("model", 3, 3),
    ]
    # The singular goes again: "models" is a term of its own once more.
    assert topic_terms_of(old, topics, tmp_path) == topic_terms_of(old, topics)
    assert topic_terms_of(old, topics, tmp_path)[1] == first


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 6),
    n=st.integers(2, 400),
    k=st.integers(1, 25),
    levels=st.integers(1, 50),  # few distinct scores: many ties, even whole rows of copies
    seed=st.integers(0, 2**32 - 1),
)
def test_top_k_gives_each_rows_highest_scores_in_order(rows, n, k, levels, seed):
    """Whichever way it ranks (the few scores above a floor, or every score), `top_k` gives
    each row's k highest scores, highest first, at distinct columns that hold them."""
    k = min(k, n - 1)
    rng = np.random.default_rng(seed)
    block = (rng.integers(0, levels, size=(rows, n)) / levels).astype(np.float32)
    block[np.arange(rows), rng.integers(0, n, size=rows)] = -np.inf  # each row's own paper
    cols, scores = neighbours.top_k(block, k)
    assert cols.shape == scores.shape == (rows, k)
    np.testing.assert_array_equal(scores, -np.sort(-block, axis=1)[:, :k])
    np.testing.assert_array_equal(np.take_along_axis(block, cols, axis=1), scores)
    assert all(len(set(row)) == k for row in cols.tolist())


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 6), max_size=30),
    k=st.integers(1, 4),
    shuffled=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_split_candidates_rank_each_papers_rows_in_order(lengths, k, shuffled, seed):
    """Each paper's first k rows in the order given, ranked 1..k, whether its rows run
    together or lie apart; the pairs are the rows at the threshold or above."""
    rng = np.random.default_rng(seed)
    ids = [f"p{i:03d}" for i, size in enumerate(lengths) for _ in range(size)]
    found = pl.DataFrame(
        {"paper_id": ids, "neighbor_id": [f"n{j}" for j in range(len(ids))],
         "score": rng.integers(0, 4, size=len(ids)) / 4},
        schema={"paper_id": pl.String, "neighbor_id": pl.String, "score": pl.Float32},
    )  # fmt: skip
    if shuffled:
        found = found.sample(fraction=1.0, shuffle=True, seed=seed % 2**31)
    top, pairs = neighbours.split_candidates(found, k, 0.5)
    seen: dict[str, int] = {}
    expected = []
    for row in found.iter_rows(named=True):
        seen[row["paper_id"]] = seen.get(row["paper_id"], 0) + 1
        if seen[row["paper_id"]] <= k:
            expected.append({**row, "rank": seen[row["paper_id"]]})
    assert top.to_dicts() == expected
    assert pairs.to_dicts() == [r for r in found.to_dicts() if r["score"] >= 0.5]


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 6), max_size=30),
    levels=st.integers(1, 8),  # few distinct scores: ties within and across lists
    order=st.sampled_from(["kept", "shuffled", "worst first"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_list_runs_and_ranks_follow_lists_kept_best_first(lengths, levels, order, seed):
    """Lists kept best first give each paper's run and each row's rank in it (as ranking
    within groups gives them); lists whose rows are shuffled or rise within a paper's run
    are told apart (None), as kept lists that cannot be trusted."""
    rng = np.random.default_rng(seed)
    rows = np.array([i for i, size in enumerate(lengths) for _ in range(size)], np.int64)
    scores = rng.integers(0, levels, size=len(rows)) / levels
    order_of = np.lexsort((-scores if order != "worst first" else scores, rows))
    rows, scores = rows[order_of], scores[order_of]
    if order == "shuffled":
        shuffle = rng.permutation(len(rows))
        rows, scores = rows[shuffle], scores[shuffle]
    frame = pl.DataFrame({"paper": rows, "score": scores})
    expected = frame.with_columns(rank=pl.int_range(pl.len()).over("paper"))["rank"].to_numpy()
    runs = kept_lists.list_runs(rows, scores)
    falls = frame.group_by("paper").agg(
        ok=(pl.col("score").diff().fill_null(0) <= 0).all()
    )["ok"].all()  # fmt: skip
    together = frame.select(pl.col("paper").rle_id()).n_unique() == len(lengths)
    if not (together and falls):
        assert runs is None
        return
    starts, papers = runs
    assert papers.tolist() == frame["paper"].unique(maintain_order=True).to_list()
    assert kept_lists.ranks(rows, scores).tolist() == expected.tolist()


@settings(max_examples=40, deadline=None)
@given(shape=st.tuples(st.integers(0, 40), st.integers(1, 40)), seed=st.integers(0, 2**32 - 1))
def test_positions_are_nonzeros_in_row_order(shape, seed):
    mask = np.random.default_rng(seed).random(shape) < 0.3
    rows, cols = neighbours.positions(mask)
    expected_rows, expected_cols = np.nonzero(mask)
    np.testing.assert_array_equal(rows, expected_rows)
    np.testing.assert_array_equal(cols, expected_cols)


@pytest.mark.parametrize("seed", range(5))
def test_renearest_equals_matching_every_vector_against_every_centroid(seed):
    rng = np.random.default_rng(seed)
    vectors = unit(rng.normal(size=(3000, 16))).astype(np.float32)
    before = unit(rng.normal(size=(12, 16))).astype(np.float32)
    labels, best = topic_model.nearest_centroids(vectors, before)
    after = np.vstack([before, unit(rng.normal(size=(3, 16)))]).astype(np.float32)
    changed = np.array(sorted({*rng.choice(12, 4, replace=False), 12, 13, 14}))
    after[changed[:4]] = unit(rng.normal(size=(4, 16)))  # four moved, three new
    again, again_best = topic_model.renearest(vectors, labels, best, after, changed)
    expected, expected_best = topic_model.nearest_centroids(vectors, after)
    assert np.array_equal(again, expected)
    assert np.allclose(again_best, expected_best, atol=1e-6)
    assert set(np.unique(labels)) != set(np.unique(again))  # the change moved papers


def test_label_means_are_each_labels_normalised_mean():
    rng = np.random.default_rng(4)
    vectors = rng.normal(size=(500, 8)).astype(np.float32)
    labels = rng.choice([2, 5, 9], size=500)
    present, means = topic_model.label_means(vectors, labels)
    assert present.tolist() == [2, 5, 9]
    for label, mean in zip(present, means, strict=True):
        expected = vectors[labels == label].mean(axis=0)
        assert np.allclose(mean, expected / np.linalg.norm(expected), atol=1e-6)


def test_kept_lists_and_rows_that_fail_their_checks_are_dropped_and_made_again(
    tmp_path, monkeypatch, caplog
):
    """Lists naming a neighbour that is none of their papers, or a score that is no cosine,
    are not updated but searched again; a damaged file of per-paper rows makes every
    paper's rows be computed again; each costs one warning."""
    lists = NeighbourLists(tmp_path, "model:weights:fp32", 32, 1, 0.85)
    found = pl.DataFrame({"paper_id": ["a", "b"], "neighbor_id": ["b", "a"], "score": [0.8, 0.8]})
    lists.save(Lists.of(["a", "b"], found))
    assert lists.load().frame().equals(found)
    bad = [((0, 1), (1, 2), (0.8, 0.8)),  # a neighbour past the papers
           ((0, 1), (1, 0), (0.8, 1.5)),  # no cosine
           ((0, 1, 0), (1, 0, 1), (0.8, 0.8, 0.7))]  # a's rows apart  # fmt: skip
    for rows, cols, scores in bad:
        wrong = Lists(pl.Series("paper_id", ["a", "b"]), *map(np.array, (rows, cols, scores)))
        lists.save(wrong)  # recorded: only its content is wrong
        with caplog.at_level(logging.WARNING):
            assert lists.load() is None
        assert not lists.path.exists()
    lists.save(Lists.of(["a", "b"], found))
    (lists.path / "ids.parquet").write_bytes(b"PAR1")  # changed behind its record
    with caplog.at_level(logging.WARNING):
        assert lists.load() is None
    said = [r.getMessage() for r in caplog.records]
    assert "1 neighbours that are none of its papers" in said[0]
    assert "scores that are not cosines" in said[1]
    assert "a paper's rows apart or not best first" in said[2]
    assert "differs from its record" in said[3] and len(said) == 4

    every = corpus_papers(30)
    aggregated(every.head(25), tmp_path / "rows")
    part = sorted((tmp_path / "rows").glob("*/part-*.parquet"))[0]
    part.write_bytes(part.read_bytes()[:100])
    read = papers_read(monkeypatch)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        again = aggregated(every, tmp_path / "rows")
    assert [r.getMessage().split(" is damaged")[0] for r in caplog.records] == [f"cache: {part}"]
    assert sorted(map(sorted, read)) == [[f"p{i:02d}" for i in range(30)],
                                         [f"p{i}" for i in range(25, 30)]]  # fmt: skip
    assert again == aggregated(every)


def test_exact_scores_are_the_same_bits_whatever_the_block_or_threads():
    """A cluster's workers search ranges of rows on one thread each; one process searches
    all rows on its cores. Their scores must match to the bit (published rounded to 6
    decimals), though a float32 product's last bit moves with the BLAS threads and with
    the block's shape."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(600, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with threadpool_limits(2, user_api="blas"):
        whole = neighbours.exact_rows(vectors, np.arange(600), 10)
    with threadpool_limits(1, user_api="blas"):
        pieces = [
            neighbours.exact_rows(vectors, np.arange(a, b), 10) for a, b in ((0, 37), (37, 600))
        ]
    split = neighbours.concat_triples(pieces)
    for got, want in zip(split, whole, strict=True):
        assert np.array_equal(got, want)
    rows, cols, scores = whole
    exact = np.einsum(
        "ij,ij->i", vectors[rows].astype(np.float64), vectors[cols].astype(np.float64)
    )
    assert np.array_equal(scores, exact.astype(np.float32))
    # Each paper's list is best first, ties by column.
    by_row = scores.reshape(600, 10)
    assert (np.diff(by_row, axis=1) <= 0).all()


def test_topics_of_more_papers_than_a_fit_takes_are_fit_on_a_sample_and_joined_nearest(
    monkeypatch,
):
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(4, 16))
    vectors = np.repeat(centres, 60, axis=0) + 0.05 * rng.normal(size=(240, 16))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    whole, whole_labels = topic_model.fit_clusters(vectors, 4, seed=0)
    monkeypatch.setattr(topic_model, "FIT_SAMPLE", 40)
    monkeypatch.setattr(topic_model, "PREDICT_ROWS", 7)
    sampled, labels = topic_model.fit_clusters(vectors, 4, seed=0)
    # Every paper is in the cluster of its nearest fitted centroid (a unit vector: the
    # nearest is the one of largest cosine), and the four blobs come out as four clusters.
    assert np.array_equal(labels, np.argmax(vectors @ sampled.T, axis=1))
    assert sorted(np.bincount(labels).tolist()) == [60, 60, 60, 60]
    # The same partition as a fit on every paper, whatever the clusters' numbering.
    pairs = set(zip(whole_labels.tolist(), labels.tolist(), strict=True))
    assert len(pairs) == 4


def test_the_embedding_matrix_is_a_view_of_the_table_in_paper_order():
    """The matrix the derive stage reads is the embeddings' own values where they hold
    the papers in order, a gathered copy in any other order, and an error where a paper has
    no vector or vectors differ in length."""
    rows = np.arange(12, dtype=np.float32).reshape(4, 3)
    table = pl.DataFrame(
        {"paper_id": ["a", "b", "c", "d"], "embedding": rows.tolist()},
        schema={"paper_id": pl.String, "embedding": pl.List(pl.Float32)},
    )
    ids = table["paper_id"]
    view = neighbours.vectors_of(table, ids)
    assert view.dtype == np.float32 and view.tolist() == rows.tolist()
    assert np.shares_memory(view, neighbours.vectors_of(table, ids))
    assert not view.flags.writeable
    gathered = neighbours.vectors_of(table.reverse(), ids)
    assert gathered.tolist() == rows.tolist()
    assert neighbours.vectors_of(table, pl.Series(["c", "a"])).tolist() == rows[[2, 0]].tolist()
    with pytest.raises(ValueError, match="no embedding"):
        neighbours.vectors_of(table.head(3), ids)
    ragged = table.with_columns(pl.Series("embedding", [[1.0], [1.0, 2.0], [3.0], [4.0]]))
    with pytest.raises(ValueError, match="different lengths"):
        neighbours.vectors_of(ragged, ids)
