"""The raw abstracts held back from the run's frames (flows/core/held.py) stay in the
Parquet parts of the parse cache (or of the run's spill folder) and are read again only for
the rows a run publishes anew."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from flows.core.held import HELD_BACK, STAND_IN, published_columns

KEY = ["source_path", "record_no"]  # a record: the file it was read from, its number there

# (Parquet part, source path, rows): see IngestResult.parts.
Part = tuple[Path, str | None, tuple[int, int] | None]


@dataclass(frozen=True)
class RecordTexts:
    """Where a run's records lie (`IngestResult.parts`), to read their raw abstracts back."""

    parts: tuple[Part, ...]

    def filled(self, frame: pl.DataFrame) -> pl.DataFrame:
        """`frame` (rows of papers, as the run holds them) with the raw abstract of each
        row's record in place of its hash; a frame without hashes as it is.

        Each part is read in turn, its raw abstracts alone and only those of the frame's
        records kept: what is held is the texts of `frame`'s rows, not the corpus's.

        Raises:
            ValueError: a row's record is in no part (the parts were changed under the run).
        """
        if STAND_IN not in frame.columns:
            return frame
        wanted = frame.select(KEY).unique()
        by_path = {path: rows.select("record_no") for (path,), rows in
                   wanted.partition_by("source_path", as_dict=True).items()}  # fmt: skip
        uses: dict[Path, list[tuple[str | None, tuple[int, int] | None]]] = {}
        for part, path, span in self.parts:
            if path is None or path in by_path:
                uses.setdefault(part, []).append((path, span))
        found = [texts_of(part, spans, wanted, by_path) for part, spans in uses.items()]
        schema = {**frame.select(KEY).schema, HELD_BACK: pl.String}
        texts = pl.concat(found) if found else pl.DataFrame(schema=schema)
        back = frame.join(texts.unique(KEY), on=KEY, how="left", maintain_order="left")
        # A part changed under the run (or a record in none) would publish another text.
        if (wrong := back.filter(pl.col(STAND_IN).ne_missing(pl.col(HELD_BACK).hash()))).height:
            first = wrong.row(0, named=True)
            raise ValueError(
                f"the raw abstracts of {wrong.height} records read back from their parts are "
                f"not the run's (first: {first['source_path']} record {first['record_no']}): "
                "the parts changed under the run; run it again"
            )
        return back.select(published_columns(frame.columns))


def texts_of(
    part: Path,
    uses: list[tuple[str | None, tuple[int, int] | None]],
    wanted: pl.DataFrame,
    by_path: dict[str, pl.DataFrame],
) -> pl.DataFrame:
    """The raw abstracts of the `wanted` records (source_path, record_no; `by_path`: their
    numbers by file) in one part, read once for all the files whose rows it holds (`uses`:
    each file's path and rows, or no path where the rows carry their own)."""
    own = any(path is None for path, _ in uses)
    rows = pl.read_parquet(part, columns=[*KEY, HELD_BACK] if own else ["record_no", HELD_BACK])
    pieces = []
    for path, span in uses:
        piece = rows if span is None else rows.slice(span[0], span[1] - span[0])
        if path is None:
            pieces.append(piece.select(*KEY, HELD_BACK).join(wanted, on=KEY, how="semi"))
            continue
        piece = piece.select("record_no", HELD_BACK).join(by_path[path], on="record_no",
                                                          how="semi")  # fmt: skip
        pieces.append(piece.select(pl.lit(path, pl.String).alias("source_path"), pl.all()))
    return pl.concat(pieces)
