"""The raw abstracts held back from a run's frames: at a million papers they are 1.3 GB of
strings that no stage but publish reads. The run's papers hold a 64-bit hash of each
instead (`STAND_IN`), which row hashes, digests and checks see in its place, so that a
changed raw abstract still changes its row; publish reads the texts back for the rows it
stages (flows/ingest/texts.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

HELD_BACK = "abstract_raw"
STAND_IN = "abstract_raw_hash"


def held_back(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` with the hash of each raw abstract (`STAND_IN`) in place of the text."""
    if HELD_BACK not in rows.columns:
        return rows
    stand_in = pl.col(HELD_BACK).hash().alias(STAND_IN)
    return rows.select(stand_in if c == HELD_BACK else pl.col(c) for c in rows.columns)


def published_columns(columns: Sequence[str]) -> list[str]:
    """The columns of rows as published: the raw abstracts in place of their hashes."""
    return [HELD_BACK if c == STAND_IN else c for c in columns]
