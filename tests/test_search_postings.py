"""The keyword postings a long-lived search keeps as arrays (flows/read/postings.py): the
same hits, scores and all-words answers as the index file's SQL, on the sample warehouse;
a damaged folder dropped and written again; scores rounded as DuckDB rounds them."""

from __future__ import annotations

import logging

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from flows.core.lake import open_lake, read_sql
from flows.read import postings, ranking, search_index
from flows.read.id_rows import IdRows
from flows.read.postings import asked_terms, held_postings

QUERIES = [
    "diffusion language model decoding",
    "the chain of thought",
    "reinforcement learning from human feedback",
    "sparse attention for long context",
    "GPT-4 and LLaMA",
    "zzyzx",
    "of the",
    "learning",
]


def held(con, settings, tmp_path):
    """The version's keyword index in use on `con`, and its postings as arrays."""
    index = search_index.keyword_index(con, settings)
    scope = search_index.keyword_scope(con, index)
    scope.__enter__()
    return scope, held_postings(con, tmp_path / "v1-keywords")


def test_the_arrays_score_and_test_all_words_as_the_sql_does(sample_run, tmp_path):
    with open_lake(sample_run.settings) as con:
        ids = [pid for (pid,) in con.execute("select paper_id from papers").fetchall()]
        scope, kept = held(con, sample_run.settings, tmp_path)
        try:
            assert len(kept.names) == len(ids) and kept.offsets[-1] == len(kept.docids) > 1000
            for text in QUERIES:
                termids, tokens = asked_terms(con, text)
                for k, among in ((len(ids), None), (3, None), (50, ids[::3]), (5, ids[:1])):
                    sql = ranking.keyword_scores(con, text, k, among)
                    assert kept.scores(termids, k, among) == sql, (text, k)
                [(terms,)] = con.execute(read_sql("search/terms"), {"text": text}).fetchall()
                for shown in (ids, ids[:7], []):
                    every = ranking.holding_every_word(con, text, shown)
                    assert kept.holding_all(*asked_terms(con, terms), shown) == every, text
            assert tokens == 1 and asked_terms(con, None) == ([], 0)
            found = kept.scores(asked_terms(con, "diffusion")[0], 10)
            assert len(found) > 3 and all(score > 0 for _, score in found)
            assert found == ranking.keyword_scores(con, "diffusion", 10)
        finally:
            scope.__exit__(None, None, None)


def test_a_damaged_folder_is_dropped_and_written_again(sample_run, tmp_path, caplog):
    with open_lake(sample_run.settings) as con:
        scope, kept = held(con, sample_run.settings, tmp_path)
        try:
            termids = asked_terms(con, "diffusion language model decoding")[0]
            before = kept.scores(termids, 20)
            folder = tmp_path / "v1-keywords"
            with (folder / "parts.npy").open("r+b") as handle:  # one part changed on disk
                handle.seek(-8, 2)
                handle.write(np.float64(99.0).tobytes())
            with caplog.at_level(logging.WARNING):
                again = held_postings(con, folder)
            assert "parts.npy" in caplog.text and "differs from its record" in caplog.text
            assert again.scores(termids, 20) == before
            (folder / "names.parquet").unlink()
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                third = held_postings(con, folder)
            assert "names.parquet" in caplog.text or "unreadable" in caplog.text
            assert third.scores(termids, 20) == before
        finally:
            scope.__exit__(None, None, None)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=50))
def test_scores_are_rounded_as_duckdb_rounds_them(values):
    scores = np.asarray(values, dtype=np.float64)
    given_scores = pa.table({"v": scores})  # noqa: F841 (read by the query below)
    con = duckdb.connect()
    expected = con.execute("select round(v, 9) as r from given_scores").fetchnumpy()["r"]
    postings.round_in_place(scores)
    assert np.array_equal(scores, expected)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=30),
    st.tuples(st.integers(-1, 5), st.integers(-1, 5)),
)
def test_postings_are_in_order_where_pairs_rise_strictly(pairs, previous):
    termid = np.array([t for t, _ in pairs], dtype=np.int64)
    docid = np.array([d for _, d in pairs], dtype=np.int32)
    chain = [previous, *pairs]
    rising = all(a < b for a, b in zip(chain, chain[1:], strict=False))
    assert postings.in_order(previous, termid, docid) == rising


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text("abc", min_size=1, max_size=3), unique=True, max_size=20),
    st.lists(st.text("abcd", min_size=1, max_size=3), max_size=10),
)
def test_id_rows_find_what_a_join_finds(ids, asked):
    rows = IdRows(pl.Series(ids, dtype=pl.String))
    joined = (
        pl.Series("paper_id", asked, dtype=pl.String)
        .to_frame()
        .join(
            pl.Series("paper_id", ids, dtype=pl.String).to_frame().with_row_index("row"),
            on="paper_id",
            how="inner",
            maintain_order="left",
        )
    )
    assert rows.found(asked).to_dicts() == joined.to_dicts()
