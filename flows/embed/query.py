"""Query encoder: a few texts to vectors without torch, from the model's exported graph.

The pipeline exports the sentence-transformers model once per machine (flows/embed/exports.py:
the whole model, transformer, mean pooling and normalisation, in fp32, checked against
fp32 torch before it is kept). A query loads that export in ONNX Runtime (OpenVINO where
ONNX Runtime is not installed: it starts slower) and tokenizes with `tokenizers` from the
model's own tokenizer.json, as sentence-transformers does: text stripped, truncated at the
model's max_seq_length, padded to the longest text.

The encoder is kept for the life of the process (`query_encoder`), so a long-lived process
(the web explorer) loads it once. Only when no export exists yet is torch imported, once,
to make it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from flows.core.settings import encoder_cache
from flows.embed.exports import (
    MIN_COSINE,
    MIN_MEAN_COSINE,
    check_agreement,
    export,
    export_folder,
    read_probe,
)
from flows.embed.graphs import PROBE_TEXTS, verify_export
from flows.embed.machine import compute_threads
from flows.embed.model import load_torch, model_path, weight_stamp, weights_sha256
from flows.embed.tokens import load_tokenizer

log = logging.getLogger("paperlake")

# The tensors the tokenizer gives, by the names the exported graph takes them under.
FEEDS = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}


@dataclass(frozen=True)
class QueryEncoder:
    """An exported model and its tokenizer: unit-norm float32 vectors, one row a text."""

    tokenizer: object  # tokenizers.Tokenizer
    inputs: tuple[str, ...]
    run: Callable[[dict[str, np.ndarray]], np.ndarray]
    backend: str
    strip: bool = True
    lowercase: bool = False

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        texts = [t.strip() if self.strip else t for t in texts]
        if self.lowercase:
            texts = [t.lower() for t in texts]
        encodings = self.tokenizer.encode_batch(texts)
        feed = {
            name: np.array([getattr(e, FEEDS[name]) for e in encodings], dtype=np.int64)
            for name in self.inputs
        }
        vectors = np.asarray(self.run(feed), dtype=np.float32)
        # As vectors.encode: normalised again in fp32, so every vector has unit norm.
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
        return vectors


def weights_digest(path: Path, cache: Path) -> str:
    """sha256 of the model's weight files (`weights_sha256`), kept on disk.

    Hashing the weights would be a sizeable share of a search's start; the digest is kept
    in the encoder cache under the files' names, sizes and modification times
    (`weight_stamp`), and computed anew when any of them changes.
    """
    stamp = weight_stamp(path)
    key = hashlib.sha256(json.dumps([str(path.resolve()), stamp]).encode()).hexdigest()[:32]
    record = cache / "digests" / f"{key}.txt"
    if record.is_file():
        digest = record.read_text().strip()
        if len(digest) == 64:
            return digest
    digest = weights_sha256(path)
    record.parent.mkdir(parents=True, exist_ok=True)
    tmp = record.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(digest + "\n")
    os.replace(tmp, record)
    return digest


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def onnx_runner(folder: Path) -> tuple[tuple[str, ...], Callable]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads := os.environ.get("PAPERLAKE_THREADS"):
        options.intra_op_num_threads = max(1, int(threads))
    options.inter_op_num_threads = 1
    # The export was optimised (fused) when made: basic passes only, a quicker load.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    session = ort.InferenceSession(
        str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    return tuple(i.name for i in session.get_inputs()), lambda feed: session.run(None, feed)[0]


def openvino_runner(folder: Path) -> tuple[tuple[str, ...], Callable]:
    import openvino as ov

    compiled = ov.Core().compile_model(
        folder / "model.xml", "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
    )
    request = compiled.create_infer_request()
    output = compiled.outputs[0]
    names = tuple(next(iter(port.get_names())) for port in compiled.inputs)
    return names, lambda feed: request.infer(feed)[output].copy()


# Backends in the order tried: the one that starts faster first (see the module's doc).
RUNNERS: dict[str, tuple[str, Callable[[Path], tuple[tuple[str, ...], Callable]]]] = {
    "onnxruntime": ("model.onnx", onnx_runner),
    "openvino": ("model.xml", openvino_runner),
}


def installed_backends() -> list[str]:
    return [name for name in RUNNERS if importlib.util.find_spec(name) is not None]


def make_export(model: str, path: Path, backend: str, folder: Path) -> None:
    """Export the model by `backend` into `folder` (imports torch; once per machine)."""
    log.info("encoder: no %s export of %s yet; making one (once per machine)", backend, model)
    fp32, _ = load_torch(model, "cpu", "fp32")
    export(fp32.st, path, backend, folder, compute_threads())


LOADING = threading.Lock()  # one load at a time: a second caller waits and gets the first's


def query_encoder(model: str) -> QueryEncoder:
    """The query encoder of `model` (a name `model_path` knows), loaded once a process
    (see `load_query_encoder`); callers in several threads share one load."""
    with LOADING:
        return load_query_encoder(model)


@lru_cache(maxsize=4)
def load_query_encoder(model: str) -> QueryEncoder:
    """The query encoder of `model`: its export loaded, made first where there is none.

    Raises:
        RuntimeError: the model has no tokenizer.json, or no backend could load or make
            an export.
    """
    path = model_path(model)
    if not (path / "tokenizer.json").is_file():
        raise RuntimeError(f"{path} has no tokenizer.json")
    backends = installed_backends()
    if not backends:
        raise RuntimeError("neither onnxruntime nor openvino is installed")
    cache = encoder_cache()
    digest = weights_digest(path, cache)
    # An export already made (by a run: OpenVINO) before making one (torch, once a machine).
    backends.sort(key=lambda b: not (export_folder(cache, b, digest) / RUNNERS[b][0]).is_file())
    config = read_json(path / "sentence_bert_config.json")
    failures = []
    for backend in backends:
        folder = export_folder(cache, backend, digest)
        try:
            return checked_encoder(model, path, backend, folder, config)
        except Exception as exc:  # an optional backend that fails: the next may work
            failures.append(f"{backend}: {type(exc).__name__}: {exc}")
            log.warning("encoder: no %s query encoder (%s)", backend, failures[-1])
    raise RuntimeError("no query encoder: " + "; ".join(failures))


def checked_encoder(
    model: str, path: Path, backend: str, folder: Path, config: dict
) -> QueryEncoder:
    """The query encoder of the export in `folder` (`loaded_encoder`); an export that
    fails is made again, once.

    Raises:
        RuntimeError (or the backend's error): the export, made again, still fails.
    """
    try:
        return loaded_encoder(model, path, backend, folder, config)
    except Exception as exc:  # noqa: BLE001 - a damaged file on disk: made again
        log.warning("encoder: the %s export fails (%s): made again", backend, exc)
        shutil.rmtree(folder, ignore_errors=True)
    return loaded_encoder(model, path, backend, folder, config)


def loaded_encoder(
    model: str, path: Path, backend: str, folder: Path, config: dict
) -> QueryEncoder:
    """The export in `folder` (made first where there is none) as a query encoder, its
    vectors of the probe texts checked against those the export keeps (`read_probe`), or
    only for being finite where it keeps none."""
    if not (folder / RUNNERS[backend][0]).is_file():
        make_export(model, path, backend, folder)
    if problem := verify_export(folder):
        raise RuntimeError(f"the {backend} export is damaged: {problem}")
    inputs, run = RUNNERS[backend][1](folder)
    lowercase = bool(config.get("do_lower_case"))
    encoder = QueryEncoder(load_tokenizer(path), inputs, run, backend, lowercase=lowercase)
    probe = read_probe(folder)
    if probe is not None:
        name = f"{backend} export"
        check_agreement(QueryTexts(encoder), probe[:2], name, MIN_MEAN_COSINE, MIN_COSINE)
    elif not np.isfinite(encoder.encode(list(PROBE_TEXTS[:1]))).all():
        raise RuntimeError(f"the {backend} export gives vectors that are not finite")
    return encoder


@dataclass(frozen=True)
class QueryTexts:
    """A query encoder as `encoders.check_agreement` calls an encoder."""

    encoder: QueryEncoder

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.encoder.encode(texts)


def encode_queries(texts: list[str], model: str) -> np.ndarray:
    """Unit-norm float32 vectors of `texts` by `model`, without torch where it has an export."""
    return query_encoder(model).encode(texts)
