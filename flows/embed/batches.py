"""Texts through an encoder in a given order, a chunk of batches at a time; on a GPU the
next chunk is tokenized while this one computes.

Needs only numpy and the encoder's own libraries (no polars, DuckDB or settings), so a
machine with torch and sentence-transformers alone runs the stage's encoding as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import numpy as np

from flows.embed.encoders import Encoder, GraphEncoder, TorchEncoder
from flows.embed.tokens import Tokens, token_lengths, unpadded_tokenizer

CHUNK_BATCHES = 4  # batches between two updates of the progress

Item = TypeVar("Item")
Made = TypeVar("Made")


def lengths_in_tokens(path: Path, texts: list[str]) -> np.ndarray:
    """Each text's length in the tokens of the model in `path`, as truncated for the model
    (in characters where its tokenizer.json cannot be read)."""
    try:
        unpadded_tokenizer(path)
    except Exception:  # no tokenizer.json, or one `tokenizers` cannot read
        return np.array([len(t) for t in texts], dtype=np.int64)
    return token_lengths(path, texts)


def longest_first(lengths: np.ndarray) -> np.ndarray:
    """Row numbers by `lengths`, longest first; equal lengths keep their order."""
    return np.argsort(-lengths, kind="stable")


def made_ahead(make: Callable[[Item], Made], items: Iterable[Item]) -> Iterator[Made]:
    """`make` of each item, in order, each made in one worker thread while the caller uses
    the one before: at most one made ahead, so memory holds two at a time.

    Tokenizing (Rust, without the GIL) and pinning the next chunk so overlaps a GPU's work
    on this one, where one thread would tokenize while the GPU waits.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenize") as worker:
        pending = None
        for item in items:
            following = worker.submit(make, item)
            if pending is not None:
                yield pending.result()
            pending = following
        if pending is not None:
            yield pending.result()


def chunk_vectors(
    encoder: Encoder,
    texts: list[str],
    order: np.ndarray,
    batch_size: int,
    tokens: Tokens | None = None,
    overlap: bool = True,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The rows of each chunk of `order` (CHUNK_BATCHES batches) and their vectors.

    Args:
        tokens: the texts tokenized once, for a GraphEncoder fed by tokenizer.json.
        overlap: a fed TorchEncoder (on a GPU) tokenizes the next chunk in a worker thread
            while this one runs (`made_ahead`); False tokenizes it after, in this thread.
            The batches, and so the vectors, are the same either way.
    """
    step = batch_size * CHUNK_BATCHES
    chunks = [order[start : start + step] for start in range(0, len(order), step)]
    if isinstance(encoder, TorchEncoder) and encoder.fed:

        def prepare(rows: np.ndarray):
            return encoder.prepare([texts[i] for i in rows], batch_size)

        made = made_ahead(prepare, chunks) if overlap else map(prepare, chunks)
        for rows, inputs in zip(chunks, made, strict=True):
            yield rows, encoder.run(inputs)
    elif isinstance(encoder, GraphEncoder) and tokens is not None:
        for rows in chunks:
            yield rows, encoder.encode_tokens(tokens, rows, batch_size)
    else:
        for rows in chunks:
            yield rows, encoder.encode([texts[i] for i in rows], batch_size)


def encode_in_order(
    encoder: Encoder,
    texts: list[str],
    order: np.ndarray,
    batch_size: int,
    dim: int,
    tokens: Tokens | None = None,
    overlap: bool = True,
    advance: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Unit-norm float32 vectors of `texts` (input order), encoded in `order`
    (`chunk_vectors`); `advance` hears how many texts each chunk held."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for rows, vectors in chunk_vectors(encoder, texts, order, batch_size, tokens, overlap):
        out[rows] = vectors
        if advance:
            advance(len(rows))
    # Normalise in fp32 so that every vector has unit norm whatever precision encoded it.
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out
