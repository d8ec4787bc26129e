"""The parse cache: parsed records of file versions already seen, as Parquet parts."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import polars as pl

from flows.core import cache as sealed
from flows.ingest.metadata import metadata_from_path
from flows.ingest.model import (
    INGEST_VERSION,
    NO_OVERRIDE,
    REJECT_SCHEMA,
    Chunk,
    FileOverride,
    ParseJob,
    SourceFile,
    Span,
)

NO_REJECTS = pl.DataFrame(schema=REJECT_SCHEMA)  # frames are immutable: one serves every file


class PartWriter:
    """Accepted records of one file written as numbered Parquet parts in a folder (named
    after `prefix` where the folder is shared: a chunk's parts among its file's)."""

    def __init__(self, folder: Path, prefix: str = ""):
        self.folder = folder
        self.prefix = prefix
        self.names: list[str] = []

    def write(self, frame: pl.DataFrame) -> None:
        if frame.height == 0:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{self.prefix}records-{len(self.names):05d}.parquet"
        sealed.write_parquet(self.folder / name, frame, whole=False)
        self.names.append(name)

    def discard(self) -> None:
        if self.prefix:
            for name in self.names:
                sealed.drop(self.folder / name)
        else:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.names = []


@dataclass
class StoredChunk:
    """A chunk of a file as the parse cache keeps it: its index record (its sources row's
    counts, and what the put-together needs), accepted records' parts, rejects, and its
    outline (each record's characters of text and fate, see flows/ingest/chunked.py)."""

    spec: dict
    parts: list[Path]
    rejects: pl.DataFrame
    outline: pl.DataFrame


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

    # A file read in chunks keeps them in `<key>.chunks/` until they are put together: its
    # plan (`plan.json`), each chunk's parts (`chunk-NNNNN-records-*.parquet`), rejects,
    # outline and index (`chunk-NNNNN.json`, written last); put together, the folder
    # becomes the file's entry (`<key>/`, its parts named as they are).

    def chunks_folder(self, job: ParseJob) -> Path:
        return self.folder / f"{self.key(job.sha256, job.override, job.parts)}.chunks"

    def load_plan(self, job: ParseJob, chunk_bytes: int) -> list[Chunk] | None:
        """The chunks planned for a file version in chunks of `chunk_bytes`, if any."""
        try:
            spec = sealed.read_record(self.chunks_folder(job) / "plan.json")
            if spec["chunk_bytes"] != chunk_bytes:
                return None
            return [Chunk(**c | {"span": Span(**c["span"])}) for c in spec["chunks"]]
        except FileNotFoundError:
            return None
        except (sealed.Damaged, KeyError, TypeError):
            return None  # planned again, and written anew

    def store_plan(self, job: ParseJob, chunk_bytes: int, chunks: Sequence[Chunk]) -> None:
        folder = self.chunks_folder(job)
        folder.mkdir(parents=True, exist_ok=True)
        spec = {"chunk_bytes": chunk_bytes, "chunks": [asdict(c) for c in chunks]}
        sealed.write_record(folder / "plan.json", spec)

    def chunk_done(self, job: ParseJob, index: int) -> bool:
        """Whether chunk `index` of a file version is parsed (its index file is there)."""
        return (self.chunks_folder(job) / f"chunk-{index:05d}.json").exists()

    def chunk_writer(self, job: ParseJob) -> PartWriter:
        """Where the parse of one chunk (`job.chunk`) writes its parts."""
        return PartWriter(self.chunks_folder(job), f"chunk-{job.chunk.index:05d}-")

    def store_chunk(
        self,
        job: ParseJob,
        spec: dict,
        writer: PartWriter,
        rejects: pl.DataFrame,
        outline: pl.DataFrame,
    ) -> None:
        """Keep a chunk's parse (its parts are written by `writer`), its index last."""
        folder, prefix = writer.folder, writer.prefix
        folder.mkdir(parents=True, exist_ok=True)
        if rejects.height:
            sealed.write_parquet(folder / f"{prefix}rejects.parquet", rejects, whole=False)
        sealed.write_parquet(folder / f"{prefix}outline.parquet", outline)
        spec |= {"parts": writer.names, "chunk": asdict(job.chunk)}
        sealed.write_record(folder / f"{prefix.rstrip('-')}.json", spec)

    def load_chunk(self, job: ParseJob) -> StoredChunk | None:
        """The parse of a chunk (`job.chunk`), checked; None where it is not there, or
        damaged (dropped)."""
        index = job.chunk.index
        folder, prefix = self.chunks_folder(job), f"chunk-{index:05d}-"
        meta = folder / f"chunk-{index:05d}.json"
        try:
            spec = sealed.read_record(meta)
            if spec["chunk"] != asdict(job.chunk):
                raise sealed.Damaged(meta, "the parse of another chunk")
            parts = [folder / name for name in spec["parts"]]
            for part in parts:
                self.verified(part)
            rejects = NO_REJECTS
            if spec["rejected"]:
                rejects = sealed.read_parquet(folder / f"{prefix}rejects.parquet")
            outline = sealed.read_parquet(folder / f"{prefix}outline.parquet")
        except FileNotFoundError:
            return None
        except (sealed.Damaged, KeyError, TypeError) as exc:
            damage = exc if isinstance(exc, sealed.Damaged) else sealed.Damaged(meta, str(exc))
            sealed.dropped(damage, f"chunk {index} of {job.path.name} is parsed again", meta)
            return None
        return StoredChunk(spec, parts, rejects, outline)

    def store_chunked(
        self, source: SourceFile, job: ParseJob, names: Sequence[str], rejects: pl.DataFrame
    ) -> list[Path]:
        """Make a file's chunks its entry: their parts (`names`) and `rejects` in its folder,
        all else of the chunks dropped, the index file last; the parts' paths."""
        key = self.key(job.sha256, job.override, job.parts)
        folder, target = self.chunks_folder(job), self.folder / key
        kept = set(names)
        for leftover in list(folder.glob("chunk-*")):
            if leftover.name not in kept and not leftover.name.endswith(sealed.SEAL):
                sealed.drop(leftover)
        sealed.drop(folder / "plan.json")
        if rejects.height:
            sealed.write_parquet(folder / "rejects.parquet", rejects, whole=False)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(folder, target)
        spec = {k: v for k, v in vars(source).items() if k != "cached"} | {"parts": list(names)}
        sealed.write_record(self.folder / f"{key}.json", spec)
        return [target / n for n in names]

    def drop_chunks(self, job: ParseJob) -> None:
        sealed.drop(self.chunks_folder(job))
