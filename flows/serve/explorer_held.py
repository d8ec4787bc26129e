"""What the explorer keeps of each version it was asked about: what search reads (a held
Corpus: its keyword index, cards and vectors on files beside the catalog, few bytes a paper
in memory) and each paper's name (sql/explore/names.sql), which every list of papers shows."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from flows.core.lake import read_sql
from flows.core.settings import Settings
from flows.read import Corpus


@dataclass(frozen=True)
class Held:
    """A version's held corpus and its papers' names."""

    corpus: Corpus
    names: pl.DataFrame

    @classmethod
    def read(cls, con: duckdb.DuckDBPyConnection, settings: Settings) -> Held:
        """What the explorer keeps of the version `con` reads."""
        corpus = Corpus(con, settings, held=True)
        try:
            return cls(corpus, con.execute(read_sql("explore/names"), {"ids": None}).pl())
        except BaseException:
            corpus.close()
            raise

    def named(self, frame: pl.DataFrame) -> pl.DataFrame:
        """`frame` with each paper named for a person: `title` (its title, else its
        abstract's first words), `untitled`, and its authors' `author_keys`."""
        # Filtered first: a join alone would hash every paper's id, for a page of hits.
        names = self.names.filter(pl.col("paper_id").is_in(frame["paper_id"].implode()))
        return frame.drop("title", "untitled", "author_keys", strict=False).join(
            names, on="paper_id", how="left", maintain_order="left"
        )
