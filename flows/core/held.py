"""The texts held back from a run's frames: at a million papers the raw abstracts are 1.3 GB
of strings and the clean ones 1.3 GB more, which each stage reads only for the papers it
works on (embed the texts it encodes, derive the papers its per-paper SQL reads, validate
the rows not checked before, publish the rows it stages). The run's papers hold a 64-bit
hash of each text instead (its stand-in), which row hashes, digests and checks see in its
place, so that a changed text still changes its row; the stages read the texts back from
the parse cache (flows/ingest/texts.py) through `Texts`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

import polars as pl

# Each text held back, and the column of its hash that the run's frames hold in its place.
HELD_BACK = {"abstract_raw": "abstract_raw_hash", "abstract": "abstract_hash"}
TEXT_OF = {stand_in: text for text, stand_in in HELD_BACK.items()}
# Where a paper's held-back texts lie: its record, the file it was read from and its number
# there (the columns of papers that name the record it shows).
RECORD = ["source_path", "record_no"]


def stand_in(text: str) -> pl.Expr:
    """The hash that stands in for the column `text` (missing where the text is)."""
    column = pl.col(text)
    return pl.when(column.is_not_null()).then(column.hash()).alias(HELD_BACK[text])


def held_back(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` with the hash of each text held back (`HELD_BACK`) in place of the text."""
    if not HELD_BACK.keys() & set(rows.columns):
        return rows
    return rows.select(stand_in(c) if c in HELD_BACK else pl.col(c) for c in rows.columns)


def stand_ins(columns: Sequence[str]) -> list[str]:
    """The stand-ins among `columns`."""
    return [c for c in columns if c in TEXT_OF]


def published_columns(columns: Sequence[str]) -> list[str]:
    """The columns of rows as published: the texts in place of their hashes."""
    return [TEXT_OF.get(c, c) for c in columns]


def text_or_stand_in(columns: Sequence[str], text: str) -> str:
    """The column among `columns` that holds `text`: itself, or its stand-in where the
    text is held back."""
    return text if text in columns else HELD_BACK[text]


def column_or_stand_in(frame: pl.DataFrame, column: str) -> pl.Series:
    """`column` of `frame`, or its stand-in where the frame holds the text back (it is
    missing where the text is: what counts missing values may read either)."""
    if column not in frame.columns and HELD_BACK.get(column) in frame.columns:
        return frame[HELD_BACK[column]]
    return frame[column]


class Texts(Protocol):
    """Where a run's held-back texts are read back (flows/ingest/texts.py, RecordTexts)."""

    def filled(self, frame: pl.DataFrame) -> pl.DataFrame:
        """`frame` with each held-back text in place of its hash, in its row order."""
        ...

    def batches(self, frame: pl.DataFrame, rows: int) -> Iterator[pl.DataFrame]:
        """`filled` of all of `frame`'s rows, in batches of about `rows` rows, in any order."""
        ...


class InFrame:
    """The texts of frames that hold them (nothing held back): as they are."""

    def filled(self, frame: pl.DataFrame) -> pl.DataFrame:
        return frame

    def batches(self, frame: pl.DataFrame, rows: int) -> Iterator[pl.DataFrame]:
        yield from frame.iter_slices(rows) if frame.height else [frame]


IN_FRAME = InFrame()
