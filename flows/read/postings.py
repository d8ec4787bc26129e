"""A version's keyword postings as a long-lived search scores them (`PostingsFile`): each
term's papers and BM25 parts as arrays in a folder beside the keyword index, a query's
terms' rows read from them and summed in NumPy where the index file's SQL would group
every posting of its terms in DuckDB.

The arrays are the index file's `postings` table (sql/search/postings.sql) as it is, in
term and then paper order: `offsets[t]:offsets[t + 1]` are term t's rows of `docids` and
`parts`, and `names[d]` is the paper of docid d. The scores, their cutoff and their ties
are those of sql/search/keyword.sql, and the all-words test that of
sql/search/all_words.sql, so a search reads the same hits either way
(tests/test_search_postings.py holds them side by side). At a million generated
abstracts (95 postings a paper) the arrays take 1.1 GB of disk; a query reads only its
terms' rows.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import duckdb
import numpy as np

from flows.core import cache
from flows.core.lake import read_sql
from flows.read.id_rows import IdRows

ARRAYS = ("offsets.npy", "docids.npy", "parts.npy")
BATCH = 1_000_000  # postings read from the index file at a time
REDO = "the keyword index's postings are read again"
SCORE_DECIMALS = 9  # as sql/search/keyword.sql rounds a score


class OnDisk:
    """A one-dimensional .npy file read a range of rows at a time into one buffer, kept
    and reused: a long-lived process holds neither the pages of the file that queries
    touched (as a mapping would) nor the freed buffers of every query before."""

    def __init__(self, path: Path) -> None:
        mapped = np.load(path, mmap_mode="r")  # its header: type, length, where rows start
        self.dtype, self.length, self.start = mapped.dtype, len(mapped), mapped.offset
        del mapped
        self.handle = path.open("rb")  # kept open: a pruned folder is read on
        self.buffer = np.empty(0, dtype=self.dtype)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, rows: slice) -> np.ndarray:
        """The rows, in the buffer: valid until the next read."""
        count = rows.stop - rows.start
        if len(self.buffer) < count:
            self.buffer = np.empty(count, dtype=self.dtype)
        out = self.buffer[:count]
        read = os.preadv(self.handle.fileno(), [out], self.start + rows.start * out.itemsize)
        if read != out.nbytes:
            raise cache.Damaged(Path(self.handle.name), f"{read} bytes where {out.nbytes} were")
        return out


class PostingsFile:
    """The postings of a version's keyword index, from a folder `write_postings_file`
    wrote: each term's rows read from the arrays as a query asks for them, the papers'
    ids in memory."""

    def __init__(self, folder: Path) -> None:
        """Open a folder `write_postings_file` wrote, checked against its record.

        Raises:
            cache.Damaged: a file is missing, or differs from what the record says.
        """
        if not folder.is_dir():
            raise FileNotFoundError(folder)
        try:
            record = cache.read_folder_record(folder, ARRAYS)
            self.names = cache.read_parquet(folder / "names.parquet")["paper_id"]
            self.offsets = np.load(folder / "offsets.npy")
            self.docids, self.parts = OnDisk(folder / "docids.npy"), OnDisk(folder / "parts.npy")
        except (OSError, KeyError, TypeError, ValueError) as exc:
            raise cache.Damaged(folder, f"unreadable: {exc}") from None
        if not (
            len(self.names) == record["papers"]
            and len(self.docids) == len(self.parts) == self.offsets[-1] == record["postings"]
        ):
            raise cache.Damaged(folder, "its files hold different counts")
        self.id_rows = IdRows(self.names)
        self.scratch = Scratch(len(self.names))
        self.lock = threading.Lock()  # one query at a time uses the buffers

    def docids_of(self, ids: list[str]) -> np.ndarray:
        """The docids of the papers of `ids` that the index holds."""
        return self.id_rows.found(ids)["row"].to_numpy()

    def term_rows(self, termid: int) -> slice:
        return slice(int(self.offsets[termid]), int(self.offsets[termid + 1]))

    def scores(
        self, termids: list[int], k: int, ids: list[str] | None = None
    ) -> list[tuple[str, float]]:
        """The k papers (of `ids`; None for all) of best BM25 summed over `termids`, best
        first, ties by paper_id: sql/search/keyword.sql's answer."""
        with self.lock:
            total, held = self.scratch.cleared()
            for termid in sorted(set(termids)):
                rows = self.term_rows(termid)
                docids = self.docids[rows]
                total[docids] += self.parts[rows]  # a term holds each paper once
                held[docids] = True
            if ids is not None:
                held &= self.scratch.marked(self.docids_of(ids))
            found, scores = self.scratch.best(k)
            names = self.names.gather(found).to_list()
        order = sorted(range(len(found)), key=lambda i: (-scores[i], names[i]))[:k]
        return [(names[i], float(scores[i])) for i in order]

    def holding_all(self, termids: list[int], tokens: int, ids: list[str]) -> set[str]:
        """Those of `ids` that hold every one of a query's `tokens` distinct terms, of which
        `termids` are the ones the index knows: sql/search/all_words.sql's answer."""
        if not ids or not tokens or len(set(termids)) < tokens:
            return set()
        docids = self.docids_of(ids)
        with self.lock:
            for termid in set(termids):
                held = self.docids[self.term_rows(termid)]  # in docid order
                at = np.minimum(np.searchsorted(held, docids), max(len(held) - 1, 0))
                docids = docids[held[at] == docids] if len(held) else docids[:0]
        return set(self.names.gather(docids).to_list())


class Scratch:
    """The arrays a query's scores are worked out in, one slot a paper, made once and
    reused: a query allocates nothing the size of the corpus, so a long-lived process
    does not keep the freed memory of one query after another (the C allocator raises
    its threshold for giving large blocks back each time one is freed)."""

    def __init__(self, papers: int) -> None:
        self.total = np.zeros(papers, dtype=np.float64)  # each paper's sum of parts
        self.held = np.zeros(papers, dtype=bool)  # papers a term of the query holds
        self.every = np.arange(papers, dtype=np.int64)
        self.found = np.empty(papers, dtype=np.int64)
        self.scores = np.empty(papers, dtype=np.float64)
        self.work = np.empty(papers, dtype=np.float64)
        self.mask = np.empty(papers, dtype=bool)

    def cleared(self) -> tuple[np.ndarray, np.ndarray]:
        """The sums and the held papers, zeroed for a query."""
        self.total.fill(0.0)
        self.held.fill(False)
        return self.total, self.held

    def marked(self, rows: np.ndarray) -> np.ndarray:
        """A mask of the papers of `rows`."""
        self.mask.fill(False)
        self.mask[rows] = True
        return self.mask

    def best(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The held papers scoring at least the k-th best rounded score (its ties kept),
        and their rounded scores."""
        count = int(np.count_nonzero(self.held))
        found = np.compress(self.held, self.every, out=self.found[:count])
        scores = np.take(self.total, found, out=self.scores[:count])
        round_in_place(scores)
        if count <= k:
            return found.copy(), scores.copy()
        work = self.work[:count]
        np.copyto(work, scores)
        work.partition(count - k)
        top = np.flatnonzero(np.greater_equal(scores, work[count - k], out=self.mask[:count]))
        return found[top], scores[top]


def round_in_place(scores: np.ndarray) -> None:
    """Round scores to SCORE_DECIMALS in place, as DuckDB's round(x, 9) rounds them (half
    away from zero): the last bits of a sum made equal whatever order it was added in."""
    scale = 10.0**SCORE_DECIMALS
    np.multiply(scores, scale, out=scores)
    scores += 0.5
    np.floor(scores, out=scores)
    scores /= scale


def write_postings_file(index: duckdb.DuckDBPyConnection, folder: Path) -> int:
    """Write the postings of the keyword index in use on `index` to `folder` (none there
    yet) as `PostingsFile` reads them; under a temporary name, moved into place whole.
    Returns the postings written.

    Raises:
        ValueError: the index's docids are not 0..papers-1, or its postings are not in
            term and paper order (sql/search/postings.sql writes them so).
    """
    [(papers, first, last)] = index.execute(
        "select count(*), min(docid), max(docid) from fts_main_docs.docs"
    ).fetchall()
    if papers and (first, last) != (0, papers - 1):
        raise ValueError(f"docids {first}..{last} for {papers} papers")
    with cache.folder_in_place(folder) as tmp:
        count = copy_postings(index, tmp)
        names = index.execute("select name as paper_id from fts_main_docs.docs order by docid")
        cache.write_parquet(tmp / "names.parquet", names.pl())
        cache.write_folder_record(tmp, ARRAYS, papers=papers, postings=count)
    return count


def copy_postings(index: duckdb.DuckDBPyConnection, folder: Path) -> int:
    """The index's postings, BATCH at a time in the order the table holds them, into
    docids.npy and parts.npy, and each term's first row into offsets.npy; their count."""
    [(terms,)] = index.execute("select count(*) from fts_main_docs.dict").fetchall()
    [(count,)] = index.execute("select count(*) from postings").fetchall()
    docids = np.lib.format.open_memmap(folder / "docids.npy", "w+", np.int32, (count,))
    parts = np.lib.format.open_memmap(folder / "parts.npy", "w+", np.float64, (count,))
    per_term = np.zeros(terms, dtype=np.int64)
    at, previous = 0, (-1, -1)
    for batch in index.execute(read_sql("search/postings_arrays")).fetch_record_batch(BATCH):
        if not len(batch):
            continue
        termid, docid = batch.column(0).to_numpy(), batch.column(1).to_numpy()
        if not in_order(previous, termid, docid):
            raise ValueError("the keyword index's postings are not in term and paper order")
        per_term += np.bincount(termid, minlength=terms)
        docids[at : at + len(batch)] = docid
        parts[at : at + len(batch)] = batch.column(2).to_numpy()
        at, previous = at + len(batch), (termid[-1], docid[-1])
    for array in (docids, parts):
        array.flush()
    np.save(folder / "offsets.npy", np.concatenate([[0], np.cumsum(per_term)]))
    return count


def in_order(previous: tuple[int, int], termid: np.ndarray, docid: np.ndarray) -> bool:
    """Whether (termid, docid) pairs, after the pair `previous`, rise strictly."""
    terms, docs = np.diff(termid, prepend=previous[0]), np.diff(docid, prepend=previous[1])
    return bool(np.all((terms > 0) | ((terms == 0) & (docs > 0))))


def held_postings(index: duckdb.DuckDBPyConnection, folder: Path) -> PostingsFile:
    """The postings of the keyword index in use on `index`, for a long-lived search: the
    `PostingsFile` in `folder`, written first where there is none (or it is damaged: then
    dropped, with one warning, and written again)."""
    if (kept := cache.opened(folder, PostingsFile, REDO)) is not None:
        return kept
    write_postings_file(index, folder)
    return PostingsFile(folder)


def asked_terms(index: duckdb.DuckDBPyConnection, text: str | None) -> tuple[list[int], int]:
    """The termids of the index that `text`'s distinct terms are, and how many distinct
    terms it has (a term the index does not know has no termid); `index` has the keyword
    index in use."""
    if text is None:
        return [], 0
    [(termids, tokens)] = index.execute(read_sql("search/asked"), {"text": text}).fetchall()
    return list(termids or []), tokens
