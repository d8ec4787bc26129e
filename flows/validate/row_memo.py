"""Which rows a suite's row-level checks ran on and which failed, kept between runs so
that a run checks only rows not checked before (sealed and checked when read)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from flows.core import cache
from flows.core.settings import package_version
from flows.validate.suites import resolve


@dataclass
class RowMemo:
    """Which rows a suite's row-level expectations were run on, and which of them failed:
    one Parquet file of (row hash, indices of the failed expectations) per table, a row per
    hash, under a key of the suite, its parameters and the library
    versions; the same key's JSON holds each expectation's result fields that do not
    depend on the rows."""

    path: Path | None

    @classmethod
    def at(cls, folder: Path | None, table: str, expectations: list[dict], parameters: dict):
        if folder is None:
            return cls(None)
        spec = [{**e, "kwargs": resolve(e["kwargs"], parameters)} for e in expectations]
        text = json.dumps(
            [spec, pl.__version__, package_version("great-expectations")],
            sort_keys=True,
            default=str,
        )
        return cls(folder / f"{table}-{hashlib.sha256(text.encode()).hexdigest()[:16]}")

    def rows(self) -> pl.DataFrame:
        """The rows checked before and the expectations each failed; none where the memo
        is missing or fails its checks (then it is dropped: every row is checked again)."""
        empty = pl.DataFrame(schema={"row_hash": pl.UInt64, "failed": pl.List(pl.UInt16)})
        if self.path is None or not self.path.with_suffix(".json").exists():
            return empty
        entry = (self.path.with_suffix(".parquet"), self.path.with_suffix(".json"))
        rows = cache.load(
            entry[0], check_memo_rows, "every row of the table is checked again", *entry
        )
        return empty if rows is None else rows

    def fields(self) -> list[dict] | None:
        if self.path is None:
            return None
        try:
            found = cache.read_record(self.path.with_suffix(".json"))
        except FileNotFoundError:
            return None
        except cache.Damaged as damage:
            self.drop(damage)
            return None
        return found if isinstance(found, list) else None

    def drop(self, damage: cache.Damaged) -> None:
        paths = (self.path.with_suffix(".parquet"), self.path.with_suffix(".json"))
        cache.dropped(damage, "every row of the table is checked again", *paths)

    def write(self, rows: pl.DataFrame, fields: list[dict]) -> None:
        """Keep `rows` and `fields` as the table's only memo (each file written whole)."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        table = self.path.name.rsplit("-", 1)[0]
        for old in self.path.parent.glob(f"{table}-*"):
            if old.stem != self.path.name:
                old.unlink(missing_ok=True)
        cache.write_parquet(self.path.with_suffix(".parquet"), rows)
        cache.write_record(self.path.with_suffix(".json"), fields)


def check_memo_rows(rows: pl.DataFrame) -> str | None:
    """Why a row memo cannot be trusted (a row hash missing or twice); None where it can."""
    if {"row_hash", "failed"} - set(rows.columns):
        return f"columns {rows.columns}"
    if rows["row_hash"].null_count() or rows["row_hash"].n_unique() != rows.height:
        return "row hashes missing or twice"
    return None
