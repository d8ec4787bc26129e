"""The embeddings table: one normalised vector a paper, only uncached texts encoded, here
or in shards on a cluster's workers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl

from flows.core.held import IN_FRAME, RECORD, Texts, text_or_stand_in
from flows.core.progress import Advance, progress
from flows.core.settings import BATCH_SIZE, PACKAGED_MODEL, encoder_cache
from flows.embed.agreement import agreement_with_fp32, pick_sample, reduced_precision
from flows.embed.cache import EmbeddingCache, TextHashes, text_sha256
from flows.embed.exports import recorded_check
from flows.embed.model import ModelInfo, load_model
from flows.embed.vectors import CHUNK_BATCHES, encode, encoding_order

SHARD_TEXTS = 8192  # most texts a shard encodes: a cache part each, progress as they end
# Texts encoded here at a time, a cache part each: their strings and tokens are what this
# process holds of them (a million texts at once held 4 GB of tokens alone). Parts follow
# the texts' hash order, so a run encoding the same texts batches them alike.
EMBED_PART = 50_000
# Papers whose abstracts are read back (`texts_made`) at a time: each read takes every part
# of the parse cache once that holds any of them.
TEXT_ROWS = 250_000


@dataclass
class EmbedResult:
    """The embeddings table and how much of it was computed now."""

    table: pl.DataFrame
    computed: int
    reused: int
    info: ModelInfo
    agreement: dict | None = None  # reduced precision against fp32, on a sample
    # The texts and vectors of that sample, where `embed_papers` left the check to its
    # caller (`check_sample`).
    sample: tuple[list[str], np.ndarray] | None = None


def paper_text(papers: pl.DataFrame) -> pl.Series:
    """The text embedded for each paper: title and abstract, or the abstract alone."""
    return papers.select(
        pl.when(pl.col("title").is_not_null() & (pl.col("title") != ""))
        .then(pl.concat_str([pl.col("title"), pl.lit(". "), pl.col("abstract")]))
        .otherwise(pl.col("abstract"))
    ).to_series()


def texts_made(papers: pl.DataFrame, texts: Texts = IN_FRAME) -> pl.Series:
    """`paper_text` of `papers` (in their order), their abstracts read back (`texts`) where
    the run holds them back, TEXT_ROWS papers at a time."""
    abstract = text_or_stand_in(papers.columns, "abstract")
    wanted = [c for c in (*RECORD, "title", abstract) if c in papers.columns]
    made = [paper_text(texts.filled(part)) for part in papers.select(wanted).iter_slices(TEXT_ROWS)]
    return pl.concat(made) if made else pl.Series("abstract", [], pl.String)


def pending_texts(
    papers: pl.DataFrame,
    cache: EmbeddingCache | None,
    known: TextHashes | None = None,
    texts: Texts = IN_FRAME,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Each paper's text hash, the vectors cached for them, and the texts to encode.

    Only the texts to encode are made (and those whose hashes no run kept), their
    abstracts read back (`texts`) where the papers hold them back: at a million papers,
    every text is a GB of strings.

    Args:
        known: the hashes of the last run's texts, where there is a cache.

    Returns:
        keyed (paper_id, text_sha256), cached (text_sha256, embedding) and todo
        (text_sha256, text: one row per distinct text not cached).
    """
    made = partial(texts_made, texts=texts)
    hashes = known.of(papers, made) if known else text_sha256(made(papers))
    keyed = pl.DataFrame({"paper_id": papers["paper_id"], "text_sha256": hashes})
    cached = (
        cache.lookup(hashes)
        if cache
        else pl.DataFrame(schema={"text_sha256": pl.String, "embedding": pl.List(pl.Float32)})
    )
    missing = ~hashes.is_in(cached["text_sha256"].implode())
    fresh = papers.filter(missing)
    todo = pl.DataFrame({"text_sha256": hashes.filter(missing), "text": made(fresh)})
    # In hash order: `encode` batches longest first, and texts of equal length then meet
    # the same batch companions in every run that encodes the same set of texts.
    return keyed, cached, todo.unique("text_sha256").sort("text_sha256")


def shards(
    todo: pl.DataFrame, batch_size: int, pieces: int = 8, model: str = PACKAGED_MODEL
) -> list[pl.DataFrame]:
    """`todo` cut into about `pieces` shards for workers, as `encode` would batch it.

    Each shard is a run of whole chunks of `encode`'s longest-first order, so every text
    meets the same batch companions as in one process, and gets bit-identical vectors.
    """
    if todo.height == 0:
        return []
    ordered = todo[encoding_order(todo["text"].to_list(), model)]
    chunk = batch_size * CHUNK_BATCHES
    chunks = -(-todo.height // chunk)
    per_shard = max(1, min(-(-chunks // pieces), SHARD_TEXTS // chunk or 1)) * chunk
    return [ordered.slice(start, per_shard) for start in range(0, ordered.height, per_shard)]


def as_list_column(vectors: np.ndarray, dim: int) -> pl.Series:
    """Vectors (one row each) as the List(Float32) values the cache and the table hold."""
    return pl.Series(vectors, dtype=pl.Array(pl.Float32, dim)).cast(pl.List(pl.Float32))


def encoded_part(
    part: pl.DataFrame,
    model: str,
    batch_size: int,
    device: str,
    precision: str,
    cache: EmbeddingCache | None,
    advance: Advance,
) -> pl.Series:
    """The vectors of a part of the texts to encode (text_sha256, text), added to the cache
    as soon as they are made: only EMBED_PART texts are Python strings and tokens at once."""
    vectors = encode(part["text"].to_list(), model, batch_size, device, precision, advance=advance)
    fresh = as_list_column(vectors, vectors.shape[1])
    if cache:
        cache.add(part["text_sha256"], fresh)
    return fresh


def encode_shard(
    shard: pl.DataFrame, model: str, batch_size: int, device: str, precision: str, cache_dir: Path
) -> tuple[str, int]:
    """Encode a shard of texts (text_sha256, text) into the embedding cache, on a worker.

    The model loads once per worker process and stays for the next shard.

    Returns:
        the cache part written and the number of texts encoded.
    """
    _, info = load_model(model, device, precision)
    if precision != "auto" and info.precision != precision:
        # Vectors of another backend would land in another cache folder than the flow reads.
        raise RuntimeError(f"this worker cannot encode at {precision}: see its log")
    vectors = encode(shard["text"].to_list(), model, batch_size, device, precision, False)
    fresh = as_list_column(vectors, info.dim)
    return str(EmbeddingCache(cache_dir, info).add(shard["text_sha256"], fresh)), shard.height


def embed_papers(
    papers: pl.DataFrame,
    model: str = PACKAGED_MODEL,
    batch_size: int = BATCH_SIZE,
    device: str = "auto",
    precision: str = "auto",
    show_progress: bool = True,
    cache_dir: Path | None = None,
    on_workers: Callable[[list[pl.DataFrame]], object] | None = None,
    pieces: int = 8,
    check: bool = True,
    texts: Texts = IN_FRAME,
) -> EmbedResult:
    """The embeddings table (paper_id, model, dim, embedding); only uncached texts are encoded.

    Args:
        on_workers: encodes shards of the texts to do elsewhere (a cluster's workers, each
            through `encode_shard`) into the cache; without it they are encoded here.
        pieces: about how many shards `on_workers` gets.
        check: compare a sample of reduced-precision vectors with fp32 here (`agreement`);
            False leaves the sample in `sample`, for `check_sample` later (the flow runs it
            beside the aggregate stage).
        texts: where the abstracts of `papers` are read back, where they hold them back.
    """
    _, info = load_model(model, device, precision)
    cache = EmbeddingCache(cache_dir, info) if cache_dir else None
    known = TextHashes(cache_dir) if cache_dir else None
    keyed, cached, todo = pending_texts(papers, cache, known, texts)
    if on_workers and cache and todo.height:
        on_workers(shards(todo, batch_size, pieces, model))
        done = cache.lookup(todo["text_sha256"])
        todo = todo.join(done, on="text_sha256", how="left", maintain_order="left")
        fresh = todo["embedding"]
        vectors = None  # in the cache now; read back below only for the agreement check
    else:
        with progress("embed", todo.height, "texts", show=show_progress) as advance:
            parts = [
                encoded_part(part, model, batch_size, device, precision, cache, advance)
                for part in todo.iter_slices(EMBED_PART)
            ]
        fresh = pl.concat(parts) if parts else pl.Series("embedding", [], pl.List(pl.Float32))
        vectors = None  # in `fresh`
    known = pl.concat(
        [cached, pl.DataFrame({"text_sha256": todo["text_sha256"], "embedding": fresh})]
    )
    table = keyed.join(known, on="text_sha256", how="left", maintain_order="left").select(
        "paper_id",
        model=pl.lit(info.model_id, dtype=pl.String),
        dim=pl.lit(info.dim, dtype=pl.Int32),
        embedding="embedding",
    )
    result = EmbedResult(table, computed=todo.height, reused=papers.height - todo.height, info=info)
    if todo.height and not reduced_precision(info.precision):
        # An fp32 export was checked against fp32 torch on this kind of CPU: no torch here
        # (loading torch beside the aggregate stage slowed that stage down).
        result.agreement = recorded_check(info.weights_sha256, info.precision, encoder_cache())
    elif todo.height:
        # Every run that encodes at reduced precision checks a few texts against fp32.
        result.sample = pick_sample(todo, vectors, fresh)
        if check:
            result.agreement = check_sample(result, model, device)
    return result


def check_sample(result: EmbedResult, model: str, device: str) -> dict | None:
    """The agreement with fp32 of `result`'s sample (None without one)."""
    if result.sample is None:
        return None
    texts, vectors = result.sample
    return agreement_with_fp32(texts, vectors, model, device, result.info.precision)
