"""The raw abstracts held back from the run's frames (flows/core/held.py) stay in the
Parquet parts of the parse cache (or of the run's spill folder) and are read again only for
the rows a run publishes anew."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from flows.core.errors import WarehouseError
from flows.core.held import HELD_BACK, STAND_IN, published_columns

KEY = ["source_path", "record_no"]  # a record: the file it was read from, its number there

# (Parquet part, source path, rows): see IngestResult.parts.
Part = tuple[Path, str | None, tuple[int, int] | None]


PARTS_SCHEMA = {"part": pl.String, "path": pl.String, "start": pl.Int64, "stop": pl.Int64}


@dataclass(frozen=True)
class RecordTexts:
    """Where a run's records lie, to read their raw abstracts back.

    `parts` is one row per file's rows in a part (`IngestResult.parts`): the part, the
    file's path (none where the rows carry their own) and its rows start..stop (none: all),
    as a frame, which Prefect hands to a task without walking it item by item (a tuple
    per file took 14 s at 200,000 files). Without a parse cache the parts lie in the
    ingest's spill folder, which lives as long as its IngestResult.
    """

    parts: pl.DataFrame

    @classmethod
    def of(cls, parts: Sequence[Part]) -> RecordTexts:
        rows = [(str(part), path, *(span or (None, None))) for part, path, span in parts]
        return cls(pl.DataFrame(rows, schema=PARTS_SCHEMA, orient="row"))

    def filled(self, frame: pl.DataFrame) -> pl.DataFrame:
        """`frame` (rows of papers, as the run holds them) with the raw abstract of each
        row's record in place of its hash; a frame without hashes as it is.

        Each part is read once, its raw abstracts alone and only those of the frame's
        records kept: what is held is the texts of `frame`'s rows, not the corpus's.

        Raises:
            WarehouseError: a part is gone, unreadable or not as the run read it (the
                parse cache changed under the run): the next run parses its files again.
        """
        if STAND_IN not in frame.columns:
            return frame
        wanted = frame.select(KEY).unique()
        texts = self.texts(wanted)
        back = frame.join(texts.unique(KEY), on=KEY, how="left", maintain_order="left")
        # A part changed under the run (or a record in none) would publish another text.
        if (wrong := back.filter(pl.col(STAND_IN).ne_missing(pl.col(HELD_BACK).hash()))).height:
            first = wrong.row(0, named=True)
            raise WarehouseError(
                f"the raw abstracts of {wrong.height} records read back from the parse cache "
                f"are not the ones this run read (first: {first['source_path']} record "
                f"{first['record_no']}): the cache changed under the run; run it again"
            )
        return back.select(published_columns(frame.columns))

    def texts(self, wanted: pl.DataFrame) -> pl.DataFrame:
        """The raw abstracts of the `wanted` records (source_path, record_no), from each
        part that holds any."""
        by_path = {path: rows.select("record_no") for (path,), rows in
                   wanted.partition_by("source_path", as_dict=True).items()}  # fmt: skip
        uses = self.parts.filter(
            pl.col("path").is_null() | pl.col("path").is_in(list(by_path))
        ).partition_by("part", as_dict=True, maintain_order=True)
        found = []
        for (part,), spans in uses.items():
            try:
                found.append(texts_of(Path(part), spans, wanted, by_path))
            except (OSError, pl.exceptions.PolarsError) as exc:
                raise WarehouseError(
                    f"the raw abstracts cannot be read back from the parse cache ({exc}): "
                    "it changed under the run; run it again"
                ) from None
        empty = pl.DataFrame(schema={**wanted.schema, HELD_BACK: pl.String})
        return pl.concat(found) if found else empty


def texts_of(
    part: Path, spans: pl.DataFrame, wanted: pl.DataFrame, by_path: dict[str, pl.DataFrame]
) -> pl.DataFrame:
    """The raw abstracts of the `wanted` records (source_path, record_no; `by_path`: their
    numbers by file) in one part, read once for all the files whose rows it holds (`spans`:
    each file's path and rows, or no path where the rows carry their own)."""
    own = spans["path"].null_count() > 0
    rows = pl.read_parquet(part, columns=[*KEY, HELD_BACK] if own else ["record_no", HELD_BACK])
    pieces = []
    for path, start, stop in spans.select("path", "start", "stop").iter_rows():
        piece = rows if start is None else rows.slice(start, stop - start)
        if path is None:
            pieces.append(piece.select(*KEY, HELD_BACK).join(wanted, on=KEY, how="semi"))
            continue
        piece = piece.select("record_no", HELD_BACK).join(by_path[path], on="record_no",
                                                          how="semi")  # fmt: skip
        pieces.append(piece.select(pl.lit(path, pl.String).alias("source_path"), pl.all()))
    return pl.concat(pieces)
