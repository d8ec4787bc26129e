"""The explorer's answer to `paperlake search` (flows/core/explorers.py): the hits the
command would find on its own, from the version the explorer holds in memory, as an Arrow
IPC file (every column's type as the command's own search gives it)."""

from __future__ import annotations

import io
import urllib.parse

import polars as pl

from flows.core.lake import published_versions
from flows.read import MIN_COSINE, no_good_match, unmatched_topic
from flows.serve.explorer import Explorer, ExplorerError, answered

ARROW = "application/vnd.apache.arrow.file"


@answered
def command_hits(
    explorer: Explorer,
    text: str,
    version: int | None,
    k: int,
    mode: str,
    venue: str | None,
    year: int | None,
    topic: str | None,
    fusion: str,
    min_cosine: float | None,
) -> tuple[pl.DataFrame, int, str | None]:
    """A search as the command asks it, on `version` (None: the latest published, as the
    command reads, whatever version the explorer shows first): the hits, the version and
    the line saying no hit is a good match (None where one is)."""
    if version is None:
        version = published_versions(explorer.lake_at(None))[-1]
    if topic is not None and (unknown := unmatched_topic(explorer.lake(version), topic)):
        raise ExplorerError(422, unknown)
    threshold = MIN_COSINE if min_cosine is None else min_cosine
    try:
        hits = explorer.hold(version).corpus.search(
            text, k, mode, venue, year, fusion, topic, min_cosine=threshold
        )
    except ValueError as exc:  # a version without embeddings, an unknown mode or fusion
        raise ExplorerError(400, str(exc)) from None
    return hits, version, no_good_match(hits, threshold)


def as_arrow(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_ipc(buffer)
    return buffer.getvalue()


def said(text: str | None) -> str:
    """A line as a header value carries it (percent-encoded: headers are ASCII)."""
    return urllib.parse.quote(text or "")
