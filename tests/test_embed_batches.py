"""The encoding loop: chunks in order, and the next chunk tokenized while this one runs."""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest

from flows.embed import batches, encoders, model
from flows.embed.vectors import encoding_order

TEXTS = [
    "Graph neural networks.",
    "Speculative decoding with several draft tokens accelerates language model inference.",
    "Protein structures are predicted from amino-acid sequences with deep networks, and the "
    "predictions are checked against crystal structures of the same proteins.",
    "Diffusion models.",
    " ".join(["Diffusion models learn to reverse a gradual noising process."] * 40),
    "We measure how often benchmark results are reproduced by later papers.",
] * 4  # 24 texts: three chunks of 4 batches of 2


@pytest.fixture(scope="module")
def fp32():
    encoder, info = model.load_torch(model.PACKAGED_MODEL, "cpu", "fp32")
    return encoder, info


def test_made_ahead_gives_each_item_in_order_with_at_most_one_made_ahead():
    made, taken = [], []

    def make(item: int) -> int:
        time.sleep(0.01)
        made.append((item, threading.current_thread().name))
        return item * item

    for value in batches.made_ahead(make, range(6)):
        taken.append(value)
        # While the caller holds item i, at most item i + 1 is being made.
        assert len(made) <= len(taken) + 1
    assert taken == [0, 1, 4, 9, 16, 25]
    assert all(name.startswith("tokenize") for _, name in made)


def test_made_ahead_of_nothing_is_nothing():
    assert list(batches.made_ahead(lambda x: x, [])) == []


def test_fed_batches_give_the_same_bits_with_and_without_the_overlap(fp32):
    encoder, info = fp32
    fed = dataclasses.replace(encoder, fed=True)
    order = encoding_order(TEXTS)
    ahead = batches.encode_in_order(fed, TEXTS, order, 2, info.dim, overlap=True)
    after = batches.encode_in_order(fed, TEXTS, order, 2, info.dim, overlap=False)
    assert ahead.shape == (24, 384) and ahead.dtype == np.float32
    assert np.array_equal(ahead, after)
    np.testing.assert_allclose(np.linalg.norm(ahead, axis=1), 1.0, atol=1e-6)
    # Equal texts give equal vectors wherever their batch fell, up to padding's rounding.
    np.testing.assert_allclose(ahead[:6], ahead[18:], atol=1e-5)


def test_fed_batches_agree_with_sentence_transformers_own(fp32):
    encoder, info = fp32
    order = encoding_order(TEXTS)
    fed = batches.encode_in_order(dataclasses.replace(encoder, fed=True), TEXTS, order, 2, info.dim)
    own = batches.encode_in_order(encoder, TEXTS, order, 2, info.dim)
    assert float(np.min(np.sum(fed * own, axis=1))) > 0.99999


def test_chunks_cover_the_order_once_in_order(fp32):
    encoder, info = fp32
    order = np.arange(len(TEXTS))[::-1]
    seen = [rows for rows, _ in batches.chunk_vectors(encoder, TEXTS, order, 3)]
    assert [len(rows) for rows in seen] == [12, 12]
    assert np.array_equal(np.concatenate(seen), order)


def test_only_a_gpu_feeds_tokenized_batches():
    assert (
        encoders.torch_encoder(model.model_path(model.PACKAGED_MODEL), "cpu", "fp32").fed is False
    )
