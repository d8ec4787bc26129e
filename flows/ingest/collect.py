"""Collecting: every raw file under the raw paths into one IngestResult, each file read or
taken from the parse cache, and the parses a cluster does first."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl

from flows.core.held import held_back
from flows.ingest import batch, model, read
from flows.ingest.batch import SmallFile, parse_small, read_small
from flows.ingest.cache import ParseCache, PartWriter
from flows.ingest.chunked import parse_in_chunks
from flows.ingest.clean import accepted_schema, concat_frames
from flows.ingest.detect import name_mismatch
from flows.ingest.jobs import parse_into_cache
from flows.ingest.metadata import metadata_warning
from flows.ingest.model import (
    REJECT_SCHEMA,
    SETTINGS_FILE,
    SOURCE_SCHEMA,
    Chunking,
    ParseJob,
    Progress,
    SourceFile,
)
from flows.ingest.overrides import Overrides
from flows.ingest.paths import (
    DOCUMENTATION_RE,
    DigestMemo,
    RawPlaces,
    discover,
    try_digest,
)
from flows.ingest.rawfile import entry_kind, shown
from flows.ingest.read import changed_note, ingest_file
from flows.ingest.texts import Part, RecordTexts


@dataclass
class IngestResult:
    """What ingest hands on: the files seen, accepted records and rejects.

    Accepted records live in Parquet parts (the parse cache or a temporary folder): each
    use of `records` reads them. Nothing keeps them in memory after a use, so a run holds
    the papers built from them and not the records as well.
    """

    sources: pl.DataFrame
    rejects: pl.DataFrame
    files: list[SourceFile] = field(default_factory=list)
    # (Parquet part, source path, rows): a part of several files' records either has no
    # path (its rows carry their own) or the rows start..stop that are the file's.
    parts: list[Part] = field(default_factory=list)
    schema: dict = field(default_factory=dict)
    workdir: tempfile.TemporaryDirectory | None = None  # holds the parts when not cached

    @property
    def records(self) -> pl.DataFrame:
        """Accepted records of every file, in file and record order.

        Each part is read once (files of equal content, and small files parsed together,
        share their parts) and each file's rows are a slice of it that carries the file's
        path: the records are the parts as read, not joined and sorted into a copy, and a
        raw folder that gains a file a day does not slow every run down.
        """
        return self.read_records(lambda rows: rows)

    def held_back_records(self) -> pl.DataFrame:
        """`records` with a hash of each raw and clean abstract in place of the text
        (flows/ingest/texts.py), read a part at a time: the run does not hold the texts."""
        return self.read_records(held_back)

    @property
    def texts(self) -> RecordTexts:
        """The records' held-back texts, read back where a stage works on them (while
        this result lives: without a parse cache, its spill folder holds them)."""
        return RecordTexts.of(self.parts)

    def read_records(self, each: Callable[[pl.DataFrame], pl.DataFrame]) -> pl.DataFrame:
        """The records (`records`), each part passed through `each` as read."""
        if not self.parts:
            return each(pl.DataFrame(schema=self.schema))
        read: dict[Path, pl.DataFrame] = {}
        pieces = []
        for part, path, span in self.parts:
            if (rows := read.get(part)) is None:
                rows = read[part] = each(pl.read_parquet(part))
            if span is not None:
                rows = rows.slice(span[0], span[1] - span[0])
            if path is not None:  # else the rows carry their own paths
                rows = rows.with_columns(source_path=pl.lit(path, pl.String))
            pieces.append(rows)
        return pl.concat(pieces, rechunk=False)


def ingest(
    paths: Iterable[Path],
    min_words: int = 20,
    cache_dir: Path | None = None,
    max_words: int | None = None,
    progress: Progress | None = None,
    chunking: Chunking | None = None,
) -> IngestResult:
    """Read every raw file under `paths`; broken files are reported in sources and skipped.

    Args:
        cache_dir: where parses of file versions are kept; unchanged files are read from
            it. Without one, accepted records are spilled to a temporary folder that lives
            as long as the result.
        max_words: abstracts longer than this are rejected (too_long); None: no limit.
        progress: called with (path, bytes read, file size) as reading goes on.
        chunking: which files are read in chunks (flows/ingest/chunked.py), and how
            large; model.CHUNKING unless given.
    """
    chunking = chunking or model.CHUNKING
    run = IngestRun([Path(p) for p in paths], min_words, max_words, cache_dir, progress, chunking)
    for number, path in enumerate(discover(run.roots)):
        run.add(number, path)
    return run.result()


@dataclass
class Entry:
    """One file found: its sources row once known, its records' parts and its rejects, and
    what a run says of its name and place once it is parsed."""

    path: Path
    source: SourceFile | None = None
    parts: list[Part] = field(default_factory=list)
    rejects: list[pl.DataFrame] = field(default_factory=list)
    job: ParseJob | None = None
    folder: Path | None = None
    relative: str = ""


class IngestRun:
    """One reading of the raw files: each file found is added in turn, then `result()`.

    Small files are read as they are added and parsed together, a batch at a time (see
    flows/ingest/batch.py); a big JSON Lines or CSV file is parsed chunk by chunk (see
    flows/ingest/chunked.py), unless a cluster parsed its chunks already; every other file
    is parsed on its own as it is added.
    """

    def __init__(
        self,
        roots: list[Path],
        min_words: int,
        max_words: int | None,
        cache_dir: Path | None,
        progress: Progress | None,
        chunking: Chunking,
    ):
        self.roots, self.min_words, self.max_words = roots, min_words, max_words
        self.progress = progress
        self.overrides = Overrides(roots)
        self.cache = ParseCache(cache_dir, min_words, max_words) if cache_dir else None
        self.memo = DigestMemo(cache_dir) if cache_dir else None
        self.workdir = (
            None if self.cache else tempfile.TemporaryDirectory(prefix="paperlake-ingest-")
        )
        self.entries: list[Entry] = []
        self.pending = Batch()
        self.settings_seen: dict[Path, Path] = {}
        self.places = RawPlaces(roots)
        self.folder_names: dict[Path, str] = {}
        self.chunking = chunking

    def folder_name(self, folder: Path) -> str:
        """The name of a raw folder once resolved (`.` is named by what it is)."""
        if folder not in self.folder_names:
            self.folder_names[folder] = folder.resolve().name
        return self.folder_names[folder]

    def add(self, number: int, path: Path) -> None:
        """List one file found in sources and, where it holds data, read it (or its cached
        parse, or keep it for a batch of small files)."""
        name = shown(path)
        if path.name == SETTINGS_FILE:
            self.settings_seen.setdefault(path.resolve(), path)
            return
        if kind := entry_kind(path):  # never opened: a FIFO would block the run
            note = f"{kind}, not a regular file: not read"
            row = SourceFile(name, f"not-regular:{kind}", 0, format="not_regular", warning=note)
            self.entries.append(Entry(path, row))
            return
        sha, size, unreadable = try_digest(path, self.memo)
        if unreadable:  # a file that cannot be read costs that file, never the run
            self.entries.append(Entry(path, SourceFile(name, sha, size, error=unreadable)))
            return
        if DOCUMENTATION_RE.match(path.name) and path not in self.roots:
            note = "documentation, not data: not read (name it with --raw to read it)"
            row = SourceFile(name, sha, size, format="documentation", warning=note)
            self.entries.append(Entry(path, row))
            return
        resolved = path.resolve()
        override, settings = self.overrides.for_file(path, resolved)
        if settings is not None:
            self.settings_seen.setdefault(settings.resolve(), settings)
        folder, relative = self.places.place(path, resolved)
        parts = [shown(self.folder_name(folder)), *shown(relative).split("/")]
        job = ParseJob(path, sha, size, override, tuple(parts))
        entry = Entry(path, job=job, folder=folder, relative=relative)
        self.entries.append(entry)
        self.read(number, entry)

    def read(self, number: int, entry: Entry) -> None:
        """A data file's parse: from the cache, into the batch of small files, or now."""
        job, name, cache = entry.job, shown(entry.path), self.cache
        if cache and cache.key(job.sha256, job.override, job.parts) in self.pending.keys:
            self.flush()  # a file of the same content is in the batch: read its parse
        hit = (
            cache.load(SourceFile(name, job.sha256, job.size), job.override, job.parts)
            if cache
            else None
        )
        if hit:
            entry.source, paths, bad, span = hit
            entry.source.cached = True
            entry.parts, entry.rejects = [(p, name, span) for p in paths], [bad]
            if self.progress:
                self.progress(name, job.size, job.size)
            return self.finish(entry)
        if job.size >= self.chunking.file_bytes and self.read_chunks(entry):
            return self.finish(entry)
        if job.size <= batch.SMALL_FILE_BYTES and (small := read_small(job, self.progress)):
            key = cache.key(job.sha256, job.override, job.parts) if cache else ""
            if self.pending.add(entry, small, key):
                self.flush()
            return None
        self.flush()  # the batch's records come before this file's
        if cache:
            entry.source, stored, entry.rejects = parse_into_cache(job, cache, self.progress)
            entry.parts = [(p, name, None) for p in stored]
        else:
            writer = PartWriter(Path(self.workdir.name) / f"{number:06d}")
            entry.source, entry.rejects = ingest_file(
                job.path, self.min_words, job.sha256, job.size, writer, job.override,
                self.max_words, self.progress, job.parts,
            )  # fmt: skip
            entry.parts = [(writer.folder / n, name, None) for n in writer.names]
        return self.finish(entry)

    def read_chunks(self, entry: Entry) -> bool:
        """A big file's parse from its chunks, where it is read in chunks (the parse cache
        keeps them; without one, a cache in the run's temporary folder)."""
        job, name = entry.job, shown(entry.path)
        cache = self.cache or ParseCache(
            Path(self.workdir.name) / "parsed", self.min_words, self.max_words
        )
        self.flush()  # the batch's records come before this file's
        row = SourceFile(name, job.sha256, job.size)
        if not self.cache and (hit := cache.load(row, job.override, job.parts)):
            parsed = hit[:3]  # a file of the same content, put together in this run
        elif (parsed := parse_in_chunks(job, cache, self.chunking, self.progress)) is None:
            return False
        entry.source, stored, bad = parsed
        entry.parts, entry.rejects = [(p, name, None) for p in stored], [bad]
        if self.progress:
            self.progress(name, job.size, job.size)
        return True

    def flush(self) -> None:
        """Parse the batch of small files and give each its row, parts and rejects."""
        pending, self.pending = self.pending.entries, Batch()
        if not pending:
            return
        done = parse_small([small for _, small in pending], self.min_words, self.max_words)
        for (entry, _), source, bad in zip(pending, done.sources, done.rejects, strict=True):
            entry.source, entry.rejects = source, [bad] if bad.height else []
        if self.cache:  # each file its entry, the cached row its own (not this run's news)
            read = [i for i, s in enumerate(done.sources) if s.error is None]
            files = [
                (replace(done.sources[i], hashed=None), done.accepted[i], done.rejects[i])
                + (pending[i][0].job.override, pending[i][0].job.parts)
                for i in read
            ]
            stored = self.cache.store_batch(files, done.records)
            for i, (paths, span) in zip(read, stored, strict=True):
                pending[i][0].parts = [(p, done.sources[i].path, span) for p in paths]
        elif done.records.height:  # one part for the batch: its rows carry their own paths
            part = Path(self.workdir.name) / f"batch-{len(self.entries):06d}.parquet"
            done.records.write_parquet(part)
            pending[0][0].parts = [(part, None, None)]
        for entry, _ in pending:
            self.finish(entry)

    def finish(self, entry: Entry) -> None:
        """Said once a file is parsed (or read from the cache, since files of equal content
        share a parse): what its name and place mean for it, and what happened to it in
        this run."""
        source, job, name = entry.source, entry.job, shown(entry.path)
        fmt = (source.format or "").removesuffix(".gz")
        named = name_mismatch(fmt, entry.path.name) if fmt and not job.override.format else None
        notes = (
            "its name is not UTF-8: shown with the bytes that are not as \\xNN"
            if name != str(entry.path)
            else None,
            named,
            source.warning,
            changed_note(source),
            metadata_warning(source, entry.folder, shown(entry.relative)),
        )
        source.warning = "; ".join(filter(None, notes)) or None

    def result(self) -> IngestResult:
        """The sources rows (settings files last), records and rejects of every file added."""
        self.flush()
        files = [entry.source for entry in self.entries]
        for key, settings in self.settings_seen.items():
            self.overrides.rules(settings)
            sha, size, unreadable = try_digest(settings, self.memo)
            error = self.overrides.errors.get(key) or unreadable
            files.append(SourceFile(shown(settings), sha, size, format="settings", error=error))
        if self.memo:
            self.memo.save()
        return IngestResult(
            sources=pl.DataFrame([f.row() for f in files], schema=SOURCE_SCHEMA),
            rejects=concat_frames([r for e in self.entries for r in e.rejects], REJECT_SCHEMA),
            files=files,
            parts=[part for entry in self.entries for part in entry.parts],
            schema=accepted_schema(self.min_words),
            workdir=self.workdir,
        )


@dataclass
class Batch:
    """Small files read and waiting to be parsed together, and when they are enough."""

    entries: list[tuple[Entry, SmallFile]] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)  # their parse-cache keys
    rows: int = 0
    chars: int = 0

    def add(self, entry: Entry, small: SmallFile, key: str) -> bool:
        """Keep a small file; True when the batch is full."""
        self.entries.append((entry, small))
        self.keys.add(key)
        self.rows += len(small.rows)
        self.chars += sum(
            len(r.get("abstract_raw") or "") + len(r.get("title_raw") or "") for r in small.rows
        )
        return self.rows >= read.BATCH_RECORDS or self.chars >= read.BATCH_CHARS
