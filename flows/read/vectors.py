"""A version's vectors as a search ranks them: in memory for one search (`MatrixVectors`),
or, for a long-lived process (the explorer), from a folder beside the keyword index
(`VectorFile`): the float32 rows memory-mapped from disk, and 8-bit codes of them in memory
that screen each query, the best of them scored again exactly from the mapped rows.

At a million papers of 384 dimensions the rows are 1.5 GB and the codes 0.4 GB: a pass
over the codes reads a quarter of the bytes of an exact pass (bench/explore_latency.py
times a search).
"""

from __future__ import annotations

import functools
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from flows.core import cache
from flows.core.lake import read_sql
from flows.read.id_rows import IdRows
from flows.read.ranking import as_matrix, best, cosines, norms

SCREEN = 10  # papers the codes hand on to exact scoring, per hit asked (1,000 at least)
SCREEN_MIN = 1_000
BATCH = 50_000  # rows read from the version, and coded, at a time
REDO = "the version's vectors are read again"
FILES = ("vectors.npy", "codes.faiss")  # checked against the folder's record


class MatrixVectors:
    """The embedded papers' ids and their vectors as one float32 matrix in memory."""

    def __init__(self, ids: list[str] | pl.Series, matrix: np.ndarray) -> None:
        self.ids = pl.Series("paper_id", ids, dtype=pl.String)  # not a list: a few bytes an id
        self.matrix = matrix

    def __len__(self) -> int:
        return len(self.ids)

    @functools.cached_property
    def lengths(self) -> np.ndarray:
        return norms(self.matrix)

    @classmethod
    def of(cls, con: duckdb.DuckDBPyConnection) -> MatrixVectors:
        frame = con.execute(read_sql("search/vectors"), {"ids": None}).pl()
        return cls(frame["paper_id"], as_matrix(frame["embedding"]))

    def ranking(
        self, query: np.ndarray, k: int, rows: np.ndarray | None = None
    ) -> list[tuple[str, float]]:
        """The k papers (of `rows`; None for all) of highest cosine to `query`."""
        close = cosines(self.matrix, self.lengths, query)
        if rows is None:
            return best(close, self.ids, k)
        return best(close[rows], self.ids.gather(rows).to_list(), k)

    def found(self, ids: list[str]) -> pl.DataFrame:
        """The embedded papers of `ids` in their order, with their rows."""
        return self.id_rows.found(ids)

    @functools.cached_property
    def id_rows(self) -> IdRows:
        return IdRows(self.ids)

    def rows_of(self, ids: list[str]) -> np.ndarray:
        return self.found(ids)["row"].to_numpy()

    def cosine_of(self, ids: list[str], query: np.ndarray) -> dict[str, float]:
        """The cosine to `query` of each embedded paper of `ids`."""
        found = self.found(ids)
        close = self.exact(found["row"].to_numpy(), query)
        return dict(zip(found["paper_id"], close.tolist(), strict=True))

    def exact(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The cosine to `query` of the papers of `rows`, from their float32 vectors."""
        matrix = np.asarray(self.matrix[rows], dtype=np.float32)
        return cosines(matrix, norms(matrix), query)


class VectorFile(MatrixVectors):
    """A version's vectors kept in a folder (`write_vector_file`): their float32 rows
    memory-mapped, their 8-bit codes (a FAISS scalar-quantizer index) in memory.

    A query's cosines are screened by the codes, and the SCREEN x k best of them scored
    again exactly from the rows: only those rows of the file are read.
    """

    def __init__(self, folder: Path) -> None:
        """Open a folder `write_vector_file` wrote, checked against its record.

        Raises:
            cache.Damaged: a file is missing, or differs from what the record says.
        """
        import faiss

        if not folder.is_dir():
            raise FileNotFoundError(folder)
        try:
            record = cache.read_folder_record(folder, FILES)
            ids = cache.read_parquet(folder / "ids.parquet")
            matrix = np.load(folder / "vectors.npy", mmap_mode="r")
            self.codes = faiss.read_index(str(folder / "codes.faiss"))
        except (OSError, KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise cache.Damaged(folder, f"unreadable: {exc}") from None
        if not ids.height == len(matrix) == self.codes.ntotal == record["rows"]:
            raise cache.Damaged(folder, "its files hold different counts of papers")
        super().__init__(ids["paper_id"], matrix)

    def ranking(
        self, query: np.ndarray, k: int, rows: np.ndarray | None = None
    ) -> list[tuple[str, float]]:
        import faiss

        screen = max(SCREEN_MIN, SCREEN * k)
        if rows is not None and len(rows) <= screen:
            candidates = np.asarray(rows)
        else:
            params = None if rows is None else faiss.SearchParameters(
                sel=faiss.IDSelectorBatch(np.asarray(rows, dtype=np.int64))
            )  # fmt: skip
            asked = np.ascontiguousarray(query, dtype=np.float32)[None, :]
            _, found = self.codes.search(asked, min(screen, len(self)), params=params)
            candidates = found[0][found[0] >= 0]
        close = self.exact(candidates, query)
        return best(close, self.ids.gather(candidates).to_list(), k)


def write_vector_file(con: duckdb.DuckDBPyConnection, folder: Path) -> int:
    """Write the attached version's vectors to `folder` (none there yet) as `VectorFile`
    reads them, BATCH rows at a time: ids.parquet, vectors.npy (float32, a row a paper),
    codes.faiss (8-bit codes, trained on the first batch) and record.json (their counts
    and digests). Written under a temporary name and moved into place whole. Returns the
    papers written (0: the version has no vectors, and nothing is written)."""
    [(count,)] = con.execute("select count(embedding) from embeddings").fetchall()
    if count == 0:
        return 0
    with cache.folder_in_place(folder) as tmp:
        ids = copy_vectors(con, tmp, count)
        cache.write_parquet(tmp / "ids.parquet", ids.rename("paper_id").to_frame())
        cache.write_folder_record(tmp, FILES, rows=count)
    return count


def copy_vectors(con: duckdb.DuckDBPyConnection, folder: Path, count: int) -> pl.Series:
    """The version's `count` vectors, BATCH at a time, into vectors.npy and their 8-bit
    codes into codes.faiss in `folder`; their papers' ids in order."""
    import faiss

    reader = con.execute(read_sql("search/vectors"), {"ids": None}).fetch_record_batch(BATCH)
    matrix, codes, ids, at = None, None, [], 0
    for batch in reader:
        rows = as_matrix(pl.from_arrow(batch.column(1)))
        if matrix is None:
            shape = (count, rows.shape[1])
            matrix = np.lib.format.open_memmap(folder / "vectors.npy", "w+", np.float32, shape)
            codes = faiss.IndexScalarQuantizer(
                rows.shape[1], faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
            )
            codes.train(rows)
        matrix[at : at + len(rows)] = rows
        codes.add(rows)
        ids.append(pl.from_arrow(batch.column(0)))
        at += len(rows)
    matrix.flush()
    del matrix
    faiss.write_index(codes, str(folder / "codes.faiss"))
    return pl.concat(ids)


def held_vectors(con: duckdb.DuckDBPyConnection, folder: Path) -> MatrixVectors:
    """The attached version's vectors for a long-lived search: the `VectorFile` in
    `folder`, written first where there is none (or it is damaged: then dropped, with one
    warning, and written again); in memory where the version has no vectors."""
    if (kept := cache.opened(folder, VectorFile, REDO)) is not None:
        return kept
    if write_vector_file(con, folder) == 0:
        return MatrixVectors.of(con)
    return VectorFile(folder)
