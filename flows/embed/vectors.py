"""Texts to unit vectors: encoded longest first, in batches of similar lengths."""

from __future__ import annotations

import numpy as np

from flows.core.progress import progress
from flows.core.settings import BATCH_SIZE, PACKAGED_MODEL
from flows.embed.encoders import GraphEncoder, TorchEncoder
from flows.embed.machine import compute_threads
from flows.embed.model import load_model, model_path
from flows.embed.tokens import token_lengths, tokenize, unpadded_tokenizer

CHUNK_BATCHES = 4  # batches between two updates of the progress


def text_lengths(texts: list[str], model: str = PACKAGED_MODEL) -> np.ndarray:
    """Each text's length in the model's tokens, as truncated for the model (in characters
    where its tokenizer.json cannot be read)."""
    path = model_path(model)
    try:
        unpadded_tokenizer(path)
    except Exception:  # no tokenizer.json, or one `tokenizers` cannot read
        return np.array([len(t) for t in texts], dtype=np.int64)
    return token_lengths(path, texts)


def encoding_order(texts: list[str], model: str = PACKAGED_MODEL) -> np.ndarray:
    """The order `encode` takes texts in: most tokens first, so each batch pads to similar
    lengths (ties keep their input order). Ordered by characters instead, batches pad
    more tokens and take longer, the counting included."""
    return longest_first(text_lengths(texts, model))


def longest_first(lengths: np.ndarray) -> np.ndarray:
    """Row numbers by `lengths`, longest first; equal lengths keep their order."""
    return np.argsort(-lengths, kind="stable")


def encode(
    texts: list[str],
    model: str = PACKAGED_MODEL,
    batch_size: int = BATCH_SIZE,
    device: str = "auto",
    precision: str = "auto",
    show_progress: bool = True,
) -> np.ndarray:
    """Unit-norm float32 vectors for `texts`, in input order.

    Texts are encoded longest first (`encoding_order`), so that each batch pads to similar
    lengths.
    """
    encoder, info = load_model(model, device, precision)
    if isinstance(encoder, TorchEncoder):  # exported graphs got their threads when compiled
        import torch  # loaded already: the encoder is torch's

        torch.set_num_threads(compute_threads())
    out = np.zeros((len(texts), info.dim), dtype=np.float32)
    if not texts:
        return out
    # An encoder fed by tokenizer.json takes the texts tokenized once, here, for the order
    # too, rather than tokenized twice.
    fed = isinstance(encoder, GraphEncoder) and encoder.tokenizer is not None
    tokens = tokenize(encoder.tokenizer, texts) if fed else None
    order = longest_first(tokens.lengths) if tokens else encoding_order(texts, model)
    step = batch_size * CHUNK_BATCHES
    with progress("embed", len(texts), "texts", show=show_progress) as advance:
        for start in range(0, len(texts), step):
            idx = order[start : start + step]
            if tokens:
                out[idx] = encoder.encode_tokens(tokens, idx, batch_size)
            else:
                out[idx] = encoder.encode([texts[i] for i in idx], batch_size)
            advance(len(idx))
    # Normalise in fp32 so that every vector has unit norm whatever precision encoded it.
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out
