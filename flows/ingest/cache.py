"""The parse cache: parsed records of file versions already seen, as Parquet parts."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from flows.core import cache as sealed
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
    `<key>/rejects.parquet`, with `<key>.json` (the file's sources row) written last. Small
    files parsed together (`store_batch`) share one part, `batch-<hash>/records-00000.parquet`:
    the index of each names the batch and the rows that are its.
    """

    def __init__(self, folder: Path, min_words: int, max_words: int | None = None):
        self.folder = folder
        self.min_words, self.max_words = min_words, max_words
        self.config = f"{INGEST_VERSION}:{min_words}:{max_words}"
        self.seals: dict[Path, dict] = {}  # parts checked in this run, each once

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
    ) -> tuple[SourceFile, list[Path], pl.DataFrame, tuple[int, int] | None] | None:
        """The cached sources row, record parts and rejects of a file version, and the rows
        of its part that are its where it shares one (a batch), if any.

        The entry is checked first (its index's digest, each part's seal, the rows of its
        parts and rejects against the counts of its sources row): a damaged entry is
        dropped with a warning and the file parsed again (None); so is a damaged shared
        part, whose other files are then parsed again without a word more."""
        key = self.key(source.sha256, override, parts)
        meta = self.folder / f"{key}.json"
        try:
            cached, paths, rejects, rows = self.checked(meta, self.folder / key, source.sha256)
        except FileNotFoundError:
            return None
        except sealed.Damaged as damage:
            entry = (meta, self.folder / key)
            if damage.path.parent.name.startswith("batch-"):
                entry += (damage.path.parent,)
            sealed.dropped(damage, f"{source.path} is parsed again", *entry)
            return None
        cached.path = source.path
        if cached.rejected:
            rejects = rejects.with_columns(source_path=pl.lit(source.path))
        return cached, paths, rejects, rows

    def checked(
        self, meta: Path, folder: Path, sha256: str
    ) -> tuple[SourceFile, list[Path], pl.DataFrame, tuple[int, int] | None]:
        """An entry's sources row, parts, rejects and rows of a shared part, checked (`load`).

        Raises:
            FileNotFoundError: no entry (its index is written last), or a shared part that
                is gone (dropped as damaged, and said so then).
            Damaged: what fails.
        """
        spec = sealed.read_record(meta)
        try:
            names = list(spec.pop("parts"))
            batch, rows = spec.pop("batch", None), spec.pop("rows", None)
            cached = SourceFile(**spec)
        except (AttributeError, KeyError, TypeError) as exc:
            raise sealed.Damaged(meta, f"not a sources row: {exc}") from None
        if cached.sha256 != sha256:
            raise sealed.Damaged(meta, f"the parse of another file version ({cached.sha256})")
        paths = [(self.folder / batch if batch else folder) / name for name in names]
        try:
            held = sum(self.verified(path)["rows"] for path in paths)
        except FileNotFoundError as exc:
            if batch:
                raise
            raise sealed.Damaged(meta, f"a part is missing: {exc}") from None
        span = (int(rows[0]), int(rows[1])) if batch and paths else None
        if span and not 0 <= span[0] <= span[1] <= held:
            raise sealed.Damaged(meta, f"rows {span} of a part of {held}")
        records = span[1] - span[0] if span else held
        if records != cached.accepted:
            raise sealed.Damaged(meta, f"{records} records where {cached.accepted} were accepted")
        if (
            not cached.rejected
        ):  # not read: most files reject nothing, and a folder may hold thousands
            return cached, paths, NO_REJECTS, span

        def counted(frame: pl.DataFrame) -> str | None:
            return None if frame.height == cached.rejected else f"{frame.height} rejects"

        try:
            rejects = sealed.read_parquet(folder / "rejects.parquet", counted)
        except FileNotFoundError:
            raise sealed.Damaged(meta, "its rejects are missing") from None
        return cached, paths, rejects, span

    def verified(self, path: Path) -> dict:
        """The seal of a part whose bytes match it, each part checked once (a shared part
        would be hashed once per file of it)."""
        if path not in self.seals:
            self.seals[path] = sealed.verify(path)
        return self.seals[path]

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
        if rejects.height:  # `load` reads it only for a file that rejected records
            sealed.write_parquet(writer.folder / "rejects.parquet", rejects, whole=False)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(writer.folder, target)
        spec = {k: v for k, v in vars(source).items() if k != "cached"} | {"parts": writer.names}
        sealed.write_record(self.folder / f"{key}.json", spec)
        return [target / n for n in writer.names]

    def store_batch(
        self,
        files: Sequence[tuple[SourceFile, int, pl.DataFrame, FileOverride, Sequence[str]]],
        records: pl.DataFrame,
    ) -> list[tuple[list[Path], tuple[int, int] | None]]:
        """Store the parses of small files at once: `records`, the accepted records of all
        of them in order, as one part, and for each file (its sources row, how many of the
        records are its, its rejects, override and path parts) its rejects in a folder of
        its own where it has some and its index file, which names its rows of the part;
        the index files last. Returns each file's parts and rows."""
        keys = [self.key(s.sha256, override, parts) for s, _, _, override, parts in files]
        name = "batch-" + hashlib.sha256(":".join(keys).encode()).hexdigest()[:32]
        part = self.folder / name / "records-00000.parquet"
        if records.height:
            part.parent.mkdir(parents=True, exist_ok=True)
            sealed.write_parquet(part, records, whole=False)
            self.seals.pop(part, None)
        stored, start = [], 0
        for key, (source, accepted, rejects, _, _) in zip(keys, files, strict=True):
            target = self.folder / key
            shutil.rmtree(target, ignore_errors=True)
            if rejects.height:
                target.mkdir(parents=True)
                sealed.write_parquet(target / "rejects.parquet", rejects, whole=False)
            stop = start + accepted
            names = [part.name] if accepted else []
            spec = {k: v for k, v in vars(source).items() if k != "cached"}
            spec |= {"parts": names, "batch": name, "rows": [start, stop]}
            sealed.write_record(self.folder / f"{key}.json", spec)
            stored.append(([part] if names else [], (start, stop) if names else None))
            start = stop
        return stored
