"""The model's tokenizer as numpy tensors: sentence-transformers' own, or its tokenizer.json
run by `tokenizers` alone (no torch), truncated and padded as sentence-transformers does."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

# Texts of very different lengths in one batch: padding, truncation at the model's
# max_seq_length and the attention mask all take part in the check.
PROBE_TEXTS = (
    "Graph neural networks.",
    "We study speculative decoding, where a small draft model proposes several tokens "
    "that the large model verifies in one pass, and show when it pays off.",
    " ".join(["Diffusion models learn to reverse a gradual noising process."] * 60),
)

Features = Callable[[list[str]], dict[str, np.ndarray]]


@dataclass(frozen=True)
class Tokens:
    """Texts tokenized once by the model's tokenizer.json (`tokenize`): truncated as the
    model truncates, not padded, every text's ids one after another in one array."""

    ids: np.ndarray  # int32
    type_ids: np.ndarray  # int32
    starts: np.ndarray  # int64: where each text's ids start, and the end of the last
    pad_id: int
    pad_type_id: int

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    def features(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The model's tensors for the texts `rows`, padded to the longest of them: what
        `tokenizer_features` gives for those texts."""
        lengths = self.lengths[rows]
        width = int(lengths.max(initial=0))
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        types = np.full((len(rows), width), self.pad_type_id, dtype=np.int64)
        for i, row in enumerate(rows):
            start, end = self.starts[row], self.starts[row + 1]
            ids[i, : end - start] = self.ids[start:end]
            types[i, : end - start] = self.type_ids[start:end]
        mask = (np.arange(width) < lengths[:, None]).astype(np.int64)
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


TOKENIZE_TEXTS = 4096  # texts tokenized at a time


def tokenized(path: Path, texts: list[str]) -> Iterator[tuple[int, list]]:
    """`texts` through the model's tokenizer.json without padding, TOKENIZE_TEXTS at a
    time: where each run of them starts, and their encodings."""
    tokenizer, _ = unpadded_tokenizer(path)
    for start in range(0, len(texts), TOKENIZE_TEXTS):
        yield start, tokenizer.encode_batch_fast(texts[start : start + TOKENIZE_TEXTS])


def token_lengths(path: Path, texts: list[str]) -> np.ndarray:
    """Each text's length in the model's tokens, as the model truncates it."""
    lengths = np.zeros(len(texts), dtype=np.int64)
    for start, batch in tokenized(path, texts):
        lengths[start : start + len(batch)] = [len(e.ids) for e in batch]
    return lengths


def tokenize(path: Path, texts: list[str]) -> Tokens:
    """`texts` through the model's tokenizer.json, as `tokenizer_features` runs it."""
    ids, types, lengths = [], [], np.zeros(len(texts), dtype=np.int64)
    for start, batch in tokenized(path, texts):
        lengths[start : start + len(batch)] = [len(e.ids) for e in batch]
        count = int(lengths[start : start + len(batch)].sum())
        ids.append(np.fromiter(chain.from_iterable(e.ids for e in batch), np.int32, count))
        types.append(np.fromiter(chain.from_iterable(e.type_ids for e in batch), np.int32, count))
    pad = unpadded_tokenizer(path)[1]
    return Tokens(
        np.concatenate(ids) if ids else np.zeros(0, np.int32),
        np.concatenate(types) if types else np.zeros(0, np.int32),
        np.concatenate([[0], np.cumsum(lengths)]),
        pad["pad_id"],
        pad["pad_type_id"],
    )


def st_features(st: Any) -> Features:
    """The sentence-transformers model's tokenizer, as numpy arrays."""

    def features(texts: list[str]) -> dict[str, np.ndarray]:
        tensors = st.preprocess(texts).items()
        return {name: value.numpy() for name, value in tensors if hasattr(value, "numpy")}

    return features


def max_seq_length(path: Path) -> int:
    """The token limit sentence-transformers applies: sentence_bert_config.json's (else the
    model's max_position_embeddings), capped by the tokenizer's own."""
    given = path / "sentence_bert_config.json"
    limit = json.loads(given.read_text()).get("max_seq_length") if given.exists() else None
    config = path / "tokenizer_config.json"
    model_max = json.loads(config.read_text()).get("model_max_length") if config.exists() else None
    if not isinstance(model_max, int | float) or model_max > 1e6:  # "no limit" in HF's words
        model_max = None
    if limit is None and (path / "config.json").exists():  # as sentence-transformers
        limit = json.loads((path / "config.json").read_text()).get("max_position_embeddings")
    known = [int(v) for v in (limit, model_max) if isinstance(v, int | float)]
    return min(known) if known else 512


def read_tokenizer(path: Path) -> Tokenizer:
    """The model's tokenizer.json run by `tokenizers`, truncating at max_seq_length as
    sentence-transformers does (tokenizer.json itself may say less)."""
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_seq_length(path))
    return tokenizer


def padding_of(tokenizer: Tokenizer) -> dict[str, Any]:
    """How a batch pads: as tokenizer.json says, else with BERT's [PAD] (id 0)."""
    pad = tokenizer.padding or {}
    return {
        "pad_id": pad.get("pad_id", 0),
        "pad_type_id": pad.get("pad_type_id", 0),
        "pad_token": pad.get("pad_token", "[PAD]"),
    }


def load_tokenizer(path: Path) -> Tokenizer:
    """`read_tokenizer`, padding to the longest text in a batch as sentence-transformers
    does (tokenizer.json may say a fixed length)."""
    tokenizer = read_tokenizer(path)
    tokenizer.enable_padding(**padding_of(tokenizer))
    return tokenizer


@lru_cache(maxsize=4)
def unpadded_tokenizer(path: Path) -> tuple[Tokenizer, dict[str, Any]]:
    """`read_tokenizer` without padding (each text's own tokens), and how
    `load_tokenizer` pads; loaded once a process."""
    tokenizer = read_tokenizer(path)
    pad = padding_of(tokenizer)
    tokenizer.no_padding()
    return tokenizer, pad


def tokenizer_features(path: Path) -> Features:
    """The model's tensors for a batch of texts, from `load_tokenizer`."""
    tokenizer = load_tokenizer(path)

    def features(texts: list[str]) -> dict[str, np.ndarray]:
        batch = tokenizer.encode_batch(texts)
        return {
            "input_ids": np.array([e.ids for e in batch], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in batch], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in batch], dtype=np.int64),
        }

    return features


def same_features(st: Any, path: Path) -> bool:
    """True when `tokenizers` alone gives the model's tokenizer's tensors on PROBE_TEXTS."""
    try:
        fast = tokenizer_features(path)(list(PROBE_TEXTS))
    except Exception:  # no tokenizer.json, or one `tokenizers` cannot read
        return False
    own = st_features(st)(list(PROBE_TEXTS))
    return all(name in fast and np.array_equal(fast[name], own[name]) for name in own)
