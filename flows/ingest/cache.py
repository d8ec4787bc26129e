"""The parse cache: parsed records of file versions already seen, as Parquet parts."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from flows import cache as sealed
from flows.ingest.metadata import metadata_from_path
from flows.ingest.model import (
    INGEST_VERSION,
    NO_OVERRIDE,
    REJECT_SCHEMA,
    FileOverride,
    SourceFile,
)

NO_REJECTS = pl.DataFrame(schema=REJECT_SCHEMA)  # frames are immutable: one serves every file


class PartWriter:
    """Accepted records of one file written as numbered Parquet parts in a folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.names: list[str] = []

    def write(self, frame: pl.DataFrame) -> None:
        if frame.height == 0:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"records-{len(self.names):05d}.parquet"
        sealed.write_parquet(self.folder / name, frame, whole=False)
        self.names.append(name)

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        self.names = []


class ParseCache:
    """Parsed records of file versions already seen, keyed by content hash and ingest config.

    A file whose bytes (and settings) did not change is not parsed again; its records are
    read back and given the file's current path. Layout: `<key>/records-*.parquet` and
    `<key>/rejects.parquet`, with `<key>.json` (the file's sources row) written last.
    """

    def __init__(self, folder: Path, min_words: int, max_words: int | None = None):
        self.folder = folder
        self.min_words, self.max_words = min_words, max_words
        self.config = f"{INGEST_VERSION}:{min_words}:{max_words}"

    def key(
        self, sha256: str, override: FileOverride = NO_OVERRIDE, parts: Sequence[str] = ()
    ) -> str:
        # The venue and year a file's path gives are part of its parse.
        spec = f"{sha256}:{self.config}:{override.origin}:{metadata_from_path(parts)[:2]}"
        return hashlib.sha256(spec.encode()).hexdigest()[:32]

    def has(
        self, sha256: str, override: FileOverride = NO_OVERRIDE, parts: Sequence[str] = ()
    ) -> bool:
        """True if the parse of this file version is in the cache."""
        return (self.folder / f"{self.key(sha256, override, parts)}.json").exists()

    def load(
        self, source: SourceFile, override: FileOverride = NO_OVERRIDE, parts: Sequence[str] = ()
    ) -> tuple[SourceFile, list[Path], pl.DataFrame] | None:
        """The cached sources row, record parts and rejects of a file version, if any.

        The entry is checked first (its index's digest, each part's seal, the rows of its
        parts and rejects against the counts of its sources row): a damaged entry is
        dropped with a warning and the file parsed again (None)."""
        key = self.key(source.sha256, override, parts)
        meta = self.folder / f"{key}.json"
        try:
            cached, names, rejects = self.checked(meta, self.folder / key, source.sha256)
        except FileNotFoundError:
            return None
        except sealed.Damaged as damage:
            sealed.dropped(damage, f"{source.path} is parsed again", meta, self.folder / key)
            return None
        cached.path = source.path
        if cached.rejected:
            rejects = rejects.with_columns(source_path=pl.lit(source.path))
        return cached, [self.folder / key / n for n in names], rejects

    @staticmethod
    def checked(
        meta: Path, folder: Path, sha256: str
    ) -> tuple[SourceFile, list[str], pl.DataFrame]:
        """An entry's sources row, part names and rejects, checked (`load`).

        Raises:
            FileNotFoundError: no entry (its index is written last).
            Damaged: what fails.
        """
        spec = sealed.read_record(meta)
        try:
            names = list(spec.pop("parts"))
            cached = SourceFile(**spec)
        except (AttributeError, KeyError, TypeError) as exc:
            raise sealed.Damaged(meta, f"not a sources row: {exc}") from None
        if cached.sha256 != sha256:
            raise sealed.Damaged(meta, f"the parse of another file version ({cached.sha256})")
        try:
            rows = sum(sealed.verify(folder / name)["rows"] for name in names)
        except FileNotFoundError as exc:
            raise sealed.Damaged(meta, f"a part is missing: {exc}") from None
        if rows != cached.accepted:
            raise sealed.Damaged(meta, f"{rows} records where {cached.accepted} were accepted")
        if (
            not cached.rejected
        ):  # not read: most files reject nothing, and a folder may hold thousands
            return cached, names, NO_REJECTS

        def counted(frame: pl.DataFrame) -> str | None:
            return None if frame.height == cached.rejected else f"{frame.height} rejects"

        try:
            rejects = sealed.read_parquet(folder / "rejects.parquet", counted)
        except FileNotFoundError:
            raise sealed.Damaged(meta, "its rejects are missing") from None
        return cached, names, rejects

    def writer(
        self, sha256: str, override: FileOverride = NO_OVERRIDE, parts: Sequence[str] = ()
    ) -> PartWriter:
        """Where a parse being cached writes its parts (renamed into place by `store`)."""
        key = self.key(sha256, override, parts)
        return PartWriter(self.folder / f"{key}.tmp-{os.getpid()}")

    def store(
        self,
        source: SourceFile,
        writer: PartWriter,
        rejects: pl.DataFrame,
        override: FileOverride = NO_OVERRIDE,
        parts: Sequence[str] = (),
    ) -> list[Path]:
        """Move a finished parse into place, the index file last; returns the parts' paths."""
        key = self.key(source.sha256, override, parts)
        target = self.folder / key
        writer.folder.mkdir(parents=True, exist_ok=True)
        sealed.write_parquet(writer.folder / "rejects.parquet", rejects, whole=False)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(writer.folder, target)
        spec = {k: v for k, v in vars(source).items() if k != "cached"} | {"parts": writer.names}
        sealed.write_record(self.folder / f"{key}.json", spec)
        return [target / n for n in writer.names]
