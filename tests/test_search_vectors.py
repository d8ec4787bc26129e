"""The vectors a search ranks (flows/read/vectors.py): the file a long-lived search keeps
ranks as exact cosine over the matrix does, filtered or not, and a damaged file is dropped
and written again, never searched."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from flows.core.lake import connect
from flows.read import vectors as read_vectors
from flows.read.vectors import MatrixVectors, VectorFile, held_vectors


def embeddings_con(n: int, dim: int = 24, seed: int = 7):
    """A DuckDB connection holding `embeddings` of n seeded unit vectors (and two papers
    without one), with the ids and the matrix."""
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(n, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = [f"p{i:05d}" for i in range(n)]
    con = connect(extensions=())
    con.execute(f"create table embeddings (paper_id varchar, embedding float[{dim}])")
    rows = [(pid, row.tolist()) for pid, row in zip(ids, matrix, strict=True)]
    con.executemany("insert into embeddings values (?, ?)", rows + [("none1", None)])
    return con, ids, matrix


def queries(dim: int, count: int = 5, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    asked = rng.normal(size=(count, dim)).astype(np.float32)
    return asked / np.linalg.norm(asked, axis=1, keepdims=True)


def test_the_file_ranks_as_the_exact_matrix_does(tmp_path):
    con, ids, matrix = embeddings_con(3_000)
    exact = MatrixVectors(ids, matrix)
    kept = held_vectors(con, tmp_path / "v1-vectors")
    assert isinstance(kept, VectorFile) and len(kept) == 3_000  # the paper without one left out
    assert isinstance(kept.matrix, np.memmap)
    rows = np.arange(0, 3_000, 7)
    for query in queries(matrix.shape[1]):
        # 1,000 of 3,000 screened by their codes: the exact top 10 among them.
        found = kept.ranking(query, 10)
        assert [p for p, _ in found] == [p for p, _ in exact.ranking(query, 10)]
        assert [s for _, s in found] == pytest.approx([s for _, s in exact.ranking(query, 10)])
        best = ids[int(np.argmax(matrix @ query))]
        assert found[0][0] == best
        # Filtered: only the papers of `rows` (429 of them: scored exactly, no screen).
        assert kept.ranking(query, 10, rows) == exact.ranking(query, 10, rows)
        assert all(int(p[1:]) % 7 == 0 for p, _ in kept.ranking(query, 10, rows))
        shown = [ids[5], "none1", ids[2_999]]
        cosine = kept.cosine_of(shown, query)
        assert set(cosine) == {ids[5], ids[2_999]}
        assert cosine[ids[5]] == pytest.approx(float(matrix[5] @ query), abs=1e-6)


def test_a_filter_wider_than_the_screen_is_screened_inside_it(tmp_path, monkeypatch):
    monkeypatch.setattr(read_vectors, "SCREEN_MIN", 50)
    con, ids, matrix = embeddings_con(2_000)
    kept = held_vectors(con, tmp_path / "v1-vectors")
    rows = np.arange(1, 2_000, 2)  # 1,000 rows, more than the 100 screened
    for query in queries(matrix.shape[1]):
        found = kept.ranking(query, 10, rows)
        assert all(int(p[1:]) % 2 == 1 for p, _ in found)
        assert [p for p, _ in found] == [
            p for p, _ in MatrixVectors(ids, matrix).ranking(query, 10, rows)
        ]


def test_a_damaged_file_is_dropped_and_written_again(tmp_path, caplog):
    con, ids, matrix = embeddings_con(500)
    folder = tmp_path / "v1-vectors"
    held_vectors(con, folder)
    with (folder / "vectors.npy").open("r+b") as handle:  # one float changed on disk
        handle.seek(-4, 2)
        handle.write(np.float32(0.5).tobytes())
    with caplog.at_level(logging.WARNING):
        again = held_vectors(con, folder)
    assert "vectors.npy" in caplog.text and "differs from its record" in caplog.text
    assert np.array_equal(np.asarray(again.matrix), matrix)
    (folder / "codes.faiss").unlink()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        third = held_vectors(con, folder)
    assert "codes.faiss" in caplog.text
    query = queries(matrix.shape[1], 1)[0]
    assert third.ranking(query, 5) == MatrixVectors(ids, matrix).ranking(query, 5)


def test_a_version_without_vectors_writes_no_file(tmp_path):
    con = connect(extensions=())
    con.execute("create table embeddings (paper_id varchar, embedding float[4])")
    kept = held_vectors(con, tmp_path / "v1-vectors")
    assert len(kept) == 0 and not (tmp_path / "v1-vectors").exists()


def test_a_folder_written_meanwhile_by_another_process_is_kept(tmp_path):
    con, ids, matrix = embeddings_con(300)
    folder = tmp_path / "v1-vectors"
    assert read_vectors.write_vector_file(con, folder) == 300
    record = (folder / "record.json").read_text()
    assert read_vectors.write_vector_file(con, folder) == 300  # as a second explorer would
    assert (folder / "record.json").read_text() == record
    assert [p.name for p in tmp_path.iterdir()] == ["v1-vectors"]  # no temporary left
    assert np.array_equal(np.asarray(VectorFile(folder).matrix), matrix)
