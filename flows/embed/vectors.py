"""Texts to unit vectors: encoded longest first, in batches of similar lengths."""

from __future__ import annotations

import numpy as np

from flows.core.progress import Advance, progress
from flows.core.settings import BATCH_SIZE, PACKAGED_MODEL
from flows.embed.batches import CHUNK_BATCHES, encode_in_order, lengths_in_tokens, longest_first
from flows.embed.encoders import GraphEncoder, TorchEncoder
from flows.embed.machine import compute_threads
from flows.embed.model import load_model, model_path
from flows.embed.tokens import tokenize

__all__ = ["CHUNK_BATCHES", "encode", "encoding_order", "longest_first", "text_lengths"]


def text_lengths(texts: list[str], model: str = PACKAGED_MODEL) -> np.ndarray:
    """Each text's length in the model's tokens, as truncated for the model (in characters
    where its tokenizer.json cannot be read)."""
    return lengths_in_tokens(model_path(model), texts)


def encoding_order(texts: list[str], model: str = PACKAGED_MODEL) -> np.ndarray:
    """The order `encode` takes texts in: most tokens first, so each batch pads to similar
    lengths (ties keep their input order). Ordered by characters instead, batches pad
    more tokens and take longer, the counting included."""
    return longest_first(text_lengths(texts, model))


def encode(
    texts: list[str],
    model: str = PACKAGED_MODEL,
    batch_size: int = BATCH_SIZE,
    device: str = "auto",
    precision: str = "auto",
    show_progress: bool = True,
    advance: Advance | None = None,
) -> np.ndarray:
    """Unit-norm float32 vectors for `texts`, in input order.

    Texts are encoded longest first (`encoding_order`), so that each batch pads to similar
    lengths; on a GPU the next batches are tokenized while the GPU computes
    (flows/embed/batches.py). `advance`: the progress these texts are part of (else their
    own, where `show_progress`).
    """
    encoder, info = load_model(model, device, precision)
    if isinstance(encoder, TorchEncoder):  # exported graphs got their threads when compiled
        import torch  # loaded already: the encoder is torch's

        torch.set_num_threads(compute_threads())
    if not texts:
        return np.zeros((0, info.dim), dtype=np.float32)
    # An encoder fed by tokenizer.json takes the texts tokenized once, here, for the order
    # too, rather than tokenized twice.
    fed = isinstance(encoder, GraphEncoder) and encoder.tokenizer is not None
    tokens = tokenize(encoder.tokenizer, texts) if fed else None
    order = longest_first(tokens.lengths) if tokens else encoding_order(texts, model)
    if advance is not None:
        return encode_in_order(encoder, texts, order, batch_size, info.dim, tokens, True, advance)
    with progress("embed", len(texts), "texts", show=show_progress) as own:
        return encode_in_order(encoder, texts, order, batch_size, info.dim, tokens, True, own)
