"""The texts held back from the run's frames (flows/core/held.py), the raw and the clean
abstracts, stay in the Parquet parts of the parse cache (or of the run's spill folder) and
are read again only for the rows a stage works on."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from flows.core.errors import WarehouseError
from flows.core.held import RECORD, TEXT_OF, published_columns, stand_in, stand_ins

# (Parquet part, source path, rows): see IngestResult.parts.
Part = tuple[Path, str | None, tuple[int, int] | None]


NAMES = {"abstract_raw": "raw abstracts", "abstract": "abstracts"}  # the texts, in errors
PARTS_SCHEMA = {"part": pl.String, "path": pl.String, "start": pl.Int64, "stop": pl.Int64}


@dataclass(frozen=True)
class RecordTexts:
    """Where a run's records lie, to read their held-back texts back (a `Texts`).

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
        """`frame` (rows of papers, as the run holds them) with the text of each row's
        record in place of each hash it holds, in its row order; a frame without hashes as
        it is.

        Each part is read once, its held-back texts alone and only those of the frame's
        records kept: what is held is the texts of `frame`'s rows, not the corpus's.

        Raises:
            WarehouseError: a part is gone, unreadable or not as the run read it (the
                parse cache changed under the run): the next run parses its files again.
        """
        held = stand_ins(frame.columns)
        if not held:
            return frame
        wanted = frame.select(RECORD).unique()
        texts = self.texts(wanted, [TEXT_OF[c] for c in held], self.parts)
        back = frame.join(texts.unique(RECORD), on=RECORD, how="left", maintain_order="left")
        return checked(back, held)

    def batches(self, frame: pl.DataFrame, rows: int) -> Iterator[pl.DataFrame]:
        """`filled` of `frame`, about `rows` rows at a time (at least one frame), in the
        order of the parts that hold them: each part is read once in all, so that a stage
        that reads every paper's text (a first run) reads the parse cache once, a batch of
        texts held at a time."""
        held = stand_ins(frame.columns)
        if not held or frame.height <= rows:
            yield self.filled(frame)
            return
        wanted = frame.select(RECORD).unique()
        columns = [TEXT_OF[c] for c in held]
        seen = []
        for parts in self.groups(wanted, rows):
            texts = self.texts(wanted, columns, parts).unique(RECORD)
            batch = frame.join(texts, on=RECORD, how="inner", maintain_order="left")
            seen.append(batch.select(RECORD))
            if batch.height:
                yield checked(batch, held)
        missing = frame.join(pl.concat([wanted.clear(), *seen]), on=RECORD, how="anti")
        if missing.height:  # records in no part: `checked` says so
            checked(missing.with_columns(pl.lit(None, pl.String).alias(c) for c in columns), held)

    def groups(self, wanted: pl.DataFrame, rows: int) -> Iterator[pl.DataFrame]:
        """The parts that hold any `wanted` record (`parts` rows), a run of them at a time
        whose files hold about `rows` rows (a part of unknown size counts as `rows`)."""
        uses = self.uses(wanted, self.parts).sort("part", maintain_order=True)
        sizes = (uses["stop"] - uses["start"]).fill_null(rows).to_list()
        names = uses["part"].to_list()
        start, held = 0, 0
        for i, size in enumerate(sizes):
            held += size
            last = i + 1 == len(names) or names[i + 1] != names[i]
            if last and held >= rows:
                yield uses.slice(start, i + 1 - start)
                start, held = i + 1, 0
        if start < len(names):
            yield uses.slice(start)

    def texts(self, wanted: pl.DataFrame, columns: list[str], parts: pl.DataFrame) -> pl.DataFrame:
        """The texts `columns` of the `wanted` records (source_path, record_no), from each
        of `parts` that holds any."""
        by_path = {path: rows.select("record_no") for (path,), rows in
                   wanted.partition_by("source_path", as_dict=True).items()}  # fmt: skip
        found = []
        for (part,), spans in (
            self.uses(wanted, parts).partition_by("part", as_dict=True, maintain_order=True).items()
        ):
            try:
                found.append(texts_of(Path(part), spans, wanted, by_path, columns))
            except (OSError, pl.exceptions.PolarsError) as exc:
                raise WarehouseError(
                    f"the held-back texts cannot be read back from the parse cache ({exc}): "
                    "it changed under the run; run it again"
                ) from None
        empty = pl.DataFrame(schema={**wanted.schema, **dict.fromkeys(columns, pl.String)})
        return pl.concat(found) if found else empty

    @staticmethod
    def uses(wanted: pl.DataFrame, parts: pl.DataFrame) -> pl.DataFrame:
        """The rows of `parts` that may hold `wanted` records, in part order."""
        paths = wanted["source_path"].unique().implode()
        return parts.filter(pl.col("path").is_null() | pl.col("path").is_in(paths))


def checked(back: pl.DataFrame, held: list[str]) -> pl.DataFrame:
    """Rows with their texts read back (`back`: the stand-ins `held` and the texts beside
    them) as published, each text checked against its hash.

    Raises:
        WarehouseError: a text is not the one the run read (the cache changed under it, or
            a record is in no part).
    """
    for column in held:
        text = TEXT_OF[column]
        wrong = back.filter(pl.col(column).ne_missing(stand_in(text)))
        if wrong.height:
            first = wrong.row(0, named=True)
            raise WarehouseError(
                f"the {NAMES[text]} of {wrong.height} records read back from the parse cache "
                f"are not the ones this run read (first: {first['source_path']} record "
                f"{first['record_no']}): the cache changed under the run; run it again"
            )
    return back.select(published_columns(back.columns[: len(back.columns) - len(held)]))


def texts_of(
    part: Path,
    spans: pl.DataFrame,
    wanted: pl.DataFrame,
    by_path: dict[str, pl.DataFrame],
    columns: list[str],
) -> pl.DataFrame:
    """The texts `columns` of the `wanted` records (source_path, record_no; `by_path`: their
    numbers by file) in one part, read once for all the files whose rows it holds (`spans`:
    each file's path and rows, or no path where the rows carry their own)."""
    own = spans["path"].null_count() > 0
    rows = pl.read_parquet(part, columns=[*RECORD, *columns] if own else ["record_no", *columns])
    pieces = []
    for path, start, stop in spans.select("path", "start", "stop").iter_rows():
        piece = rows if start is None else rows.slice(start, stop - start)
        if path is None:
            pieces.append(piece.select(*RECORD, *columns).join(wanted, on=RECORD, how="semi"))
            continue
        piece = piece.select("record_no", *columns).join(by_path[path], on="record_no",
                                                         how="semi")  # fmt: skip
        pieces.append(piece.select(pl.lit(path, pl.String).alias("source_path"), pl.all()))
    return pl.concat(pieces)
