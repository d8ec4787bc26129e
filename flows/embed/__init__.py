"""Embed: sentence-transformers vectors for papers, normalised, with the model recorded.

Offers the embeddings table (`embed_papers`, or `encode_shard` on a cluster's workers), the
fp32 check of a reduced precision (`check_sample`), the model and what identifies its
vectors (`load_model`, `ModelInfo`), plain text encoding (`encode`), and the query encoder
a search uses without torch (`encode_queries`).
"""

from flows.embed.agreement import warm_up
from flows.embed.cache import EmbeddingCache, TextHashes
from flows.embed.exports import MIN_COSINE, MIN_MEAN_COSINE
from flows.embed.machine import compute_threads
from flows.embed.model import ModelInfo, load_model, model_path, weights_sha256
from flows.embed.papers import EmbedResult, check_sample, embed_papers, encode_shard, paper_text
from flows.embed.query import encode_queries
from flows.embed.vectors import encode

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
