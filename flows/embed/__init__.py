"""Embed: sentence-transformers vectors for papers, normalised, with the model recorded.

Offers the embeddings table (`embed_papers`, or `encode_shard` on a cluster's workers), the
fp32 check of a reduced precision (`check_sample`), the model and what identifies its
vectors (`load_model`, `ModelInfo`), plain text encoding (`encode`), and the query encoder
a search uses without torch (`encode_queries`).

Each name is imported from its module when first asked for: the modules that encode
(batches, encoders, tokens) then load with torch, sentence-transformers and numpy alone,
on a machine without polars or DuckDB, as bench/gpu_check.sh runs them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Each name the stage offers, and the module that holds it.
FACE = {
    "warm_up": "agreement",
    "EmbeddingCache": "cache",
    "TextHashes": "cache",
    "MIN_COSINE": "exports",
    "MIN_MEAN_COSINE": "exports",
    "compute_threads": "machine",
    "ModelInfo": "model",
    "load_model": "model",
    "model_path": "model",
    "weights_sha256": "model",
    "EmbedResult": "papers",
    "check_sample": "papers",
    "embed_papers": "papers",
    "encode_shard": "papers",
    "paper_text": "papers",
    "encode_queries": "query",
    "encode": "vectors",
}
__all__ = [
    "MIN_COSINE",
    "MIN_MEAN_COSINE",
    "EmbedResult",
    "EmbeddingCache",
    "ModelInfo",
    "TextHashes",
    "check_sample",
    "compute_threads",
    "embed_papers",
    "encode",
    "encode_queries",
    "encode_shard",
    "load_model",
    "model_path",
    "paper_text",
    "warm_up",
    "weights_sha256",
]

if TYPE_CHECKING:
    from flows.embed.agreement import warm_up
    from flows.embed.cache import EmbeddingCache, TextHashes
    from flows.embed.exports import MIN_COSINE, MIN_MEAN_COSINE
    from flows.embed.machine import compute_threads
    from flows.embed.model import ModelInfo, load_model, model_path, weights_sha256
    from flows.embed.papers import EmbedResult, check_sample, embed_papers, encode_shard, paper_text
    from flows.embed.query import encode_queries
    from flows.embed.vectors import encode


def __getattr__(name: str) -> Any:
    if name not in FACE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{FACE[name]}"), name)
    globals()[name] = value  # found once
    return value
