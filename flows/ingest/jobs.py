"""Jobs: the parses a cluster does before a run reads the parse cache, each a whole file or
one chunk of a big one, and one job parsed into the cache."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import polars as pl

from flows.ingest import model
from flows.ingest.cache import ParseCache
from flows.ingest.chunked import file_chunks, parse_chunk
from flows.ingest.clean import concat_frames
from flows.ingest.model import (
    REJECT_SCHEMA,
    SETTINGS_FILE,
    Chunking,
    ParseJob,
    Progress,
    SourceFile,
)
from flows.ingest.overrides import Overrides
from flows.ingest.paths import DOCUMENTATION_RE, DigestMemo, discover, raw_place, try_digest
from flows.ingest.rawfile import shown
from flows.ingest.read import ingest_file


def parse_into_cache(
    job: ParseJob, cache: ParseCache, progress: Progress | None = None
) -> tuple[SourceFile, list[Path], list[pl.DataFrame]]:
    """Parse one file, or one chunk of a file (`job.chunk`), into the parse cache (a file
    that failed stays out of it).

    Returns:
        its sources row, the Parquet parts of its accepted records, and its rejects; of a
        chunk, its counts only (its file's row comes once all its chunks are read).
    """
    if job.chunk is not None:
        return parse_chunk(job, cache, progress), [], []
    writer = cache.writer(job.sha256, job.override, job.parts)
    source, bad = ingest_file(
        job.path, cache.min_words, job.sha256, job.size, writer, job.override,
        cache.max_words, progress, job.parts,
    )  # fmt: skip
    if source.error is not None:
        return source, [writer.folder / n for n in writer.names], bad
    rejects = concat_frames(bad, REJECT_SCHEMA)
    # The cached row is the file's; that it changed while read is this run's news only.
    stored = cache.store(replace(source, hashed=None), writer, rejects, job.override, job.parts)
    return source, stored, bad


def pending_parses(
    paths: Iterable[Path],
    min_words: int,
    max_words: int | None,
    cache_dir: Path,
    chunking: Chunking | None = None,
) -> list[ParseJob]:
    """The raw files under `paths` that `ingest` would parse now: those whose parse is not
    in the cache, a job each, or a job for each chunk not parsed yet of a file read in
    chunks (see flows/ingest/chunked.py). A cluster parses them side by side first;
    `ingest` then reads the cache.

    Settings files, documentation and unreadable files are left to `ingest`.
    """
    roots = [Path(p) for p in paths]
    overrides = Overrides(roots)
    cache = ParseCache(cache_dir, min_words, max_words)
    memo = DigestMemo(cache_dir)
    chunking = chunking or model.CHUNKING
    jobs = []
    for path in discover(roots):
        if path.name == SETTINGS_FILE or (DOCUMENTATION_RE.match(path.name) and path not in roots):
            continue
        sha, size, unreadable = try_digest(path, memo)
        if unreadable:
            continue
        override, _ = overrides.for_file(path)
        folder, relative = raw_place(path, roots)
        parts = (shown(folder.resolve().name), *shown(relative).split("/"))
        if cache.has(sha, override, parts):
            continue
        job = ParseJob(path, sha, size, override, parts)
        if chunks := file_chunks(job, cache, chunking):
            jobs += [replace(job, chunk=c) for c in chunks if not cache.chunk_done(job, c.index)]
        else:
            jobs.append(job)
    memo.save()
    return jobs
