"""Each paper's neighbour lists kept between runs, so that a run updates them (sealed and
checked when read: flows/core/cache.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl

from flows.core import cache


class NeighbourLists:
    """Each paper's exact candidate lists from the last run, kept in the cache, so that
    the next run updates them (`update_candidates`) instead of searching all papers again.

    One sealed Parquet file per model (id, weights, precision), list width, k and
    threshold (flows/core/cache.py), each paper's rows together and best first, trimmed to what
    the neighbours and pairs read (`trim_lists`); a paper without any other paper to list
    has a row with no neighbour.
    """

    def __init__(self, folder: Path, model_key: str, width: int, k: int, threshold: float):
        key = f"{model_key}:{width}:{k}:{threshold!r}:trimmed"
        self.path = folder / f"lists-{hashlib.sha256(key.encode()).hexdigest()[:16]}.parquet"

    def load(self) -> tuple[pl.DataFrame, list[str]] | None:
        """The lists and the papers they were made for, if a run left them (and they
        pass their checks: else they are dropped, and the papers searched again)."""
        stored = cache.load(self.path, check_lists, "every paper's neighbours are searched again")
        if stored is None:
            return None
        return stored.drop_nulls("neighbor_id"), stored["paper_id"].unique().to_list()

    def save(self, ids: list[str], found: pl.DataFrame) -> None:
        papers = pl.DataFrame({"paper_id": ids}, schema={"paper_id": pl.String})
        alone = papers.join(found, on="paper_id", how="anti")
        cache.write_parquet(self.path, pl.concat([found, alone], how="diagonal_relaxed"))


def check_lists(lists: pl.DataFrame) -> str | None:
    """Why kept neighbour lists cannot be trusted: a neighbour that is none of the lists'
    papers, a score that is not a cosine, a row without a paper; None where they can."""
    if not {"paper_id", "neighbor_id", "score"} <= set(lists.columns):
        return f"columns {lists.columns}"
    papers = lists["paper_id"]
    if papers.null_count():
        return f"{papers.null_count()} rows without a paper"
    listed = lists.drop_nulls("neighbor_id")
    strangers = listed.filter(~pl.col("neighbor_id").is_in(papers.unique().implode())).height
    if strangers:
        return f"{strangers} neighbours that are none of its papers"
    scores = listed["score"]
    if not scores.is_finite().all() or (scores.abs() > 1 + 1e-4).any():
        return "scores that are not cosines"
    return None
