"""Each paper's neighbour lists kept between runs by position (`Lists`): the papers' ids
once, then three numbers a row, sealed and checked when read (flows/core/cache.py)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from flows.core import cache
from flows.derive.neighbours import Triples, id_frame


@dataclass
class Lists:
    """Each paper's candidate lists by position: the papers `ids` (in order), and rows of
    (paper, neighbour, score), paper and neighbour as positions in `ids`; each paper's rows
    together and best first (ties by neighbour), as `candidates` makes them."""

    ids: pl.Series
    rows: np.ndarray
    cols: np.ndarray
    scores: np.ndarray  # float64

    @classmethod
    def of(cls, ids: list[str] | pl.Series, found: pl.DataFrame) -> Lists:
        """`found` (paper_id, neighbor_id, score) by position in `ids`, in kept order."""
        names = pl.Series("paper_id", ids, dtype=pl.String)
        place = pl.DataFrame({"paper_id": names, "at": np.arange(len(names), dtype=np.int32)})

        def at(column: str) -> np.ndarray:
            named = found.select(pl.col(column).alias("paper_id"))
            placed = named.join(place, on="paper_id", how="left", maintain_order="left")["at"]
            if placed.null_count():
                raise ValueError(f"lists name papers that are none of theirs ({column})")
            return placed.to_numpy()

        rows, cols = at("paper_id"), at("neighbor_id")
        scores = found["score"].to_numpy().astype(np.float64)
        order = np.lexsort((cols, -scores, rows))
        return cls(names, rows[order], cols[order], scores[order])

    def frame(self) -> pl.DataFrame:
        """The lists as (paper_id, neighbor_id, score), in their order."""
        return id_frame(self.ids, self.rows, self.cols, self.scores)


class NeighbourLists:
    """Each paper's exact candidate lists from the last run, kept in the cache, so that
    the next run updates them (`update_lists`) instead of searching all papers again.

    One folder per model (id, weights, precision), list width, k and threshold: the papers'
    ids in order and the lists by position (`Lists`: three numbers a row, not two ids),
    trimmed to what the neighbours and pairs read (`trim_lists`), with a record of both
    files' digests (flows/core/cache.py), checked when read.
    """

    FILES = ("ids.parquet", "lists.parquet")

    def __init__(self, folder: Path, model_key: str, width: int, k: int, threshold: float):
        key = f"{model_key}:{width}:{k}:{threshold!r}:trimmed"
        name = f"lists-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        self.path = folder / name
        self.named_lists = folder / f"{name}.parquet"  # lists by id, as runs kept them once

    def load(self) -> Lists | None:
        """The lists and the papers they were made for, if a run left them (and they
        pass their checks: else they are dropped, and the papers searched again)."""
        redo = "every paper's neighbours are searched again"
        if not self.path.exists() and self.named_lists.exists():
            return self.load_named(redo)
        return cache.opened(self.path, read_lists, redo)

    def load_named(self, redo: str) -> Lists | None:
        """The lists an earlier paperlake kept by id (one sealed file, a row with no
        neighbour for a paper alone), as `Lists`: a warehouse of a million papers is not
        searched again for a change of format."""
        stored = cache.load(self.named_lists, None, redo)
        if stored is None:
            return None
        ids = stored["paper_id"].drop_nulls().unique().sort()
        try:
            lists = Lists.of(ids, stored.drop_nulls("neighbor_id"))
        except (ValueError, pl.exceptions.PolarsError) as exc:
            lists, reason = None, str(exc)
        else:
            reason = check_lists(lists)
        if reason:
            cache.dropped(cache.Damaged(self.named_lists, reason), redo)
            return None
        return lists

    def save(self, lists: Lists) -> None:
        """Keep `lists` for the next run, in place of what was kept."""
        self.path.mkdir(parents=True, exist_ok=True)
        frames = {
            "ids.parquet": pl.DataFrame({"paper_id": lists.ids}),
            "lists.parquet": pl.DataFrame(
                {
                    "paper": lists.rows.astype(np.int32),
                    "neighbor": lists.cols.astype(np.int32),
                    "score": lists.scores.astype(np.float64),
                }
            ),  # fmt: skip
        }
        for name, frame in frames.items():
            cache.write_parquet(self.path / name, frame)
        cache.write_folder_record(self.path, self.FILES, papers=len(lists.ids))
        cache.drop(self.named_lists)

    def drop(self) -> None:
        cache.drop(self.path)
        cache.drop(self.named_lists)


def read_lists(folder: Path) -> Lists:
    """The lists a folder of `NeighbourLists` holds, checked against its record and for
    what they must hold (`check_lists`).

    Raises:
        cache.Damaged: a file differs from the record, or the lists cannot be trusted.
    """
    try:
        cache.read_folder_record(folder, NeighbourLists.FILES)
        ids = pl.read_parquet(folder / "ids.parquet")["paper_id"]
        rows = pl.read_parquet(folder / "lists.parquet")
    except (OSError, KeyError, TypeError, ValueError, pl.exceptions.PolarsError) as exc:
        if isinstance(exc, FileNotFoundError) and not folder.exists():
            raise
        raise cache.Damaged(folder, f"unreadable: {exc}") from None
    lists = Lists(ids, rows["paper"].to_numpy(), rows["neighbor"].to_numpy(),
                  rows["score"].to_numpy())  # fmt: skip
    if reason := check_lists(lists):
        raise cache.Damaged(folder, reason)
    return lists


def check_lists(lists: Lists) -> str | None:
    """Why kept neighbour lists cannot be trusted: a paper or neighbour that is none of the
    lists' papers, a score that is not a cosine, a paper's rows apart or not best first;
    None where they can."""
    n = len(lists.ids)
    if lists.ids.null_count() or lists.ids.n_unique() != n:
        return "papers missing or twice"
    for what, at in (("papers", lists.rows), ("neighbours", lists.cols)):
        strangers = int(np.count_nonzero((at < 0) | (at >= n)))
        if strangers:
            return f"{strangers} {what} that are none of its papers"
    scores = lists.scores
    if not np.isfinite(scores).all() or (np.abs(scores) > 1 + 1e-4).any():
        return "scores that are not cosines"
    if list_runs(lists.rows, scores) is None:
        return "a paper's rows apart or not best first"
    return None


def list_runs(rows: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Where each paper's run of rows starts and the papers, for rows kept as `Lists` keeps
    them; None where a paper's rows lie apart or rise within its run."""
    if not len(rows):
        return np.zeros(0, np.int64), rows[:0]
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    papers = rows[starts]
    rising = np.diff(scores) > 0
    rising[starts[1:] - 1] = False  # a run's end may rise to the next run's start
    if len(np.unique(papers)) != len(papers) or rising.any():
        return None
    return starts, papers


def ranks(rows: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Each row's place in its paper's list (0 = best), rows kept as `Lists` keeps them."""
    runs = list_runs(rows, scores)
    if runs is None:
        raise ValueError("lists whose papers' rows lie apart or rise")
    starts, _ = runs
    lengths = np.diff(np.r_[starts, len(rows)])
    return np.arange(len(rows)) - np.repeat(starts, lengths)


def trimmed(triples: Triples, k: int, threshold: float, take: int | None = None) -> Triples:
    """`trim_lists` of lists by position (and at most `take` rows a paper)."""
    rows, cols, scores = triples
    rank = ranks(rows, scores)
    keep = (rank < k) | (scores >= threshold)
    if take is not None:
        keep &= rank < take
    return rows[keep], cols[keep], scores[keep]
