"""Encoders: one sentence-transformers model run by torch, OpenVINO or ONNX Runtime.

Exported graphs hold fp32 weights (no quantisation, no fp16), are made once per machine
from the model's own weights and kept on disk under a key of the weights' sha256 and the
library versions that made them. They compute in fp32, or in bf16 where the CPU has it
(openvino-bf16). An export is checked against fp32 torch before its first use on a kind
of CPU; the passed check is recorded in it, and later processes load it with `tokenizers`
and the runtime alone, without importing torch.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache, partial
from importlib.metadata import PackageNotFoundError, version
from itertools import chain
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from flows.core import cache
from flows.embed.graphs import (
    PROBE_TEXTS,
    export_onnx,
    export_openvino,
    seal_export,
    verify_export,
)

# An export is kept only when its vectors agree with fp32 torch this closely (cosine).
MIN_MEAN_COSINE = 0.9999
MIN_COSINE = 0.999
log = logging.getLogger("paperlake")


class Encoder(Protocol):
    """Makes sentence vectors (float32, one row a text) of texts in the batches given."""

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray: ...


@dataclass
class TorchEncoder:
    """sentence-transformers' own encode, in the model's dtype (fp32, or bf16 where native)."""

    st: Any

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        import torch

        with torch.inference_mode():
            vectors = self.st.encode(
                texts,
                batch_size=batch_size,
                convert_to_numpy=False,
                convert_to_tensor=True,
                show_progress_bar=False,
            )
        return vectors.float().cpu().numpy()


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


@dataclass
class GraphEncoder:
    """An exported graph of the whole model and the tokenizer that feeds it: the
    sentence-transformers model's own, or the same tokenizer.json run by `tokenizers`
    alone (no torch), which also takes texts tokenized before (`tokenizer`: the model
    folder whose tokenizer.json feeds it, for `tokenize`).

    Batches are cut from the texts in the order given, so equal inputs give equal batches.
    `run` takes the batches' inputs one after another and gives their outputs in order
    (it may run several at a time, as OpenVINO's streams do).
    """

    features: Features
    inputs: tuple[str, ...]
    run: Callable[[Iterator[dict[str, np.ndarray]]], list[np.ndarray]]
    tokenizer: Path | None = None

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self._outputs(
            self.features(texts[start : start + batch_size])
            for start in range(0, len(texts), batch_size)
        )

    def encode_tokens(self, tokens: Tokens, rows: np.ndarray, batch_size: int) -> np.ndarray:
        """`encode` of the texts `rows` of `tokens`, tokenized by `tokenize`."""
        return self._outputs(
            tokens.features(rows[start : start + batch_size])
            for start in range(0, len(rows), batch_size)
        )

    def _outputs(self, batches: Iterator[dict[str, np.ndarray]]) -> np.ndarray:
        feeds = ({name: features[name] for name in self.inputs} for features in batches)
        return np.concatenate(self.run(feeds)).astype(np.float32, copy=False)


def one_at_a_time(infer: Callable[[dict[str, np.ndarray]], np.ndarray]):
    """A `GraphEncoder.run` that runs each batch when the one before it is done."""
    return lambda feeds: [infer(feed) for feed in feeds]


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


def read_tokenizer(path: Path):
    """The model's tokenizer.json run by `tokenizers`, truncating at max_seq_length as
    sentence-transformers does (tokenizer.json itself may say less)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_seq_length(path))
    return tokenizer


def padding_of(tokenizer) -> dict[str, Any]:
    """How a batch pads: as tokenizer.json says, else with BERT's [PAD] (id 0)."""
    pad = tokenizer.padding or {}
    return {
        "pad_id": pad.get("pad_id", 0),
        "pad_type_id": pad.get("pad_type_id", 0),
        "pad_token": pad.get("pad_token", "[PAD]"),
    }


def load_tokenizer(path: Path):
    """`read_tokenizer`, padding to the longest text in a batch as sentence-transformers
    does (tokenizer.json may say a fixed length)."""
    tokenizer = read_tokenizer(path)
    tokenizer.enable_padding(**padding_of(tokenizer))
    return tokenizer


@lru_cache(maxsize=4)
def unpadded_tokenizer(path: Path) -> tuple[Any, dict[str, Any]]:
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


def openvino_encoder(features: Features, folder: Path, threads: int, hint: str) -> GraphEncoder:
    """The exported model compiled by OpenVINO for this CPU, computing in `hint` (f32, bf16),
    in streams: each of the `threads` cores runs a batch of its own, where one batch on all
    of them waits for the slowest (1,000 abstracts on 2 cores: 58 where 54 a second)."""
    import openvino as ov

    # Without the hint OpenVINO picks bf16 by itself on CPUs that have it.
    config = {
        "INFERENCE_PRECISION_HINT": hint,
        "INFERENCE_NUM_THREADS": threads,
        "PERFORMANCE_HINT": "THROUGHPUT",
        "NUM_STREAMS": threads,
    }
    core = ov.Core()
    if os.access(folder, os.W_OK):  # compiled once, then loaded: 0.07 s where 0.16 s
        core.set_property({"CACHE_DIR": str(folder / "compiled")})
    compiled = core.compile_model(folder / "model.xml", "CPU", config)
    queue = ov.AsyncInferQueue(compiled, compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    names = tuple(sorted(next(iter(port.get_names())) for port in compiled.inputs))

    def run(feeds: Iterator[dict[str, np.ndarray]]) -> list[np.ndarray]:
        out: dict[int, np.ndarray] = {}

        def keep(request, i: int) -> None:
            out[i] = request.get_output_tensor(0).data.copy()

        queue.set_callback(keep)
        count = 0
        for count, feed in enumerate(feeds, start=1):
            queue.start_async(feed, count - 1)  # waits while every request is busy
        queue.wait_all()
        return [out[i] for i in range(count)]

    return GraphEncoder(features, names, run)


def onnx_encoder(features: Features, folder: Path, threads: int) -> GraphEncoder:
    """The exported model in an ONNX Runtime session on the CPU."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    names = tuple(i.name for i in session.get_inputs())
    return GraphEncoder(features, names, one_at_a_time(lambda feed: session.run(None, feed)[0]))


EXPORTERS: dict[str, Callable[[Any, Path, Path], None]] = {
    "openvino": lambda st, path, folder: export_openvino(st, folder),
    "onnxruntime": lambda st, path, folder: export_onnx(path, folder),
}
# Each precision: the export it runs and how it loads one.
# Each loader takes the tokenizer as a Features function.
LOADERS: dict[str, Callable[[Features, Path, int], GraphEncoder]] = {
    "openvino-fp32": partial(openvino_encoder, hint="f32"),
    "openvino-bf16": partial(openvino_encoder, hint="bf16"),
    "onnx-fp32": onnx_encoder,
}
EXPORTED = {"openvino-fp32": "openvino", "openvino-bf16": "openvino", "onnx-fp32": "onnxruntime"}


def library_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "missing"


def export_folder(cache: Path, backend: str, weights_sha256: str) -> Path:
    """Where the export of these weights by this backend lives: the weights' hash and the
    versions of the exporter and the runtime name it, so an upgrade exports anew."""
    key = f"{backend}-{library_version(backend)}-torch-{library_version('torch')}"
    return cache / weights_sha256[:16] / key


def agreement(vectors: np.ndarray, exact: np.ndarray) -> tuple[float, float]:
    """Mean and least cosine of rows of `vectors` to the rows of `exact`."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine = np.sum(unit * (exact / np.linalg.norm(exact, axis=1, keepdims=True)), axis=1)
    return float(cosine.mean()), float(cosine.min())


def check_agreement(
    encoder: Encoder, exact: np.ndarray, name: str, min_mean_cosine: float, min_cosine: float
) -> tuple[float, float]:
    """Refuse an encoder whose vectors of PROBE_TEXTS stray from `exact`, fp32 torch's
    vectors of them (or vectors that are not finite); else its mean and least cosine.

    Raises:
        RuntimeError: the mean or least cosine is below its bound.
    """
    texts = list(PROBE_TEXTS[: len(exact)])
    mean, least = agreement(encoder.encode(texts, 4), exact)
    if not (mean >= min_mean_cosine and least >= min_cosine):  # NaN fails too
        raise RuntimeError(
            f"{name} disagrees with fp32 torch: mean cosine {mean:.6f}, min {least:.6f}"
        )
    return mean, least


def export(st: Any, path: Path, backend: str, folder: Path, threads: int) -> None:
    """Export the model into `folder` by `backend`, kept only if its fp32 vectors agree,
    with fp32 torch's vectors of PROBE_TEXTS (`write_probe`) for later checks.

    Processes exporting at once each write their own folder first; the first to finish
    publishes it, the others' are dropped.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = folder.with_name(f".{folder.name}.{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        EXPORTERS[backend](st, path, work)
        fp32 = next(p for p, b in EXPORTED.items() if b == backend and p.endswith("fp32"))
        encoder = LOADERS[fp32](st_features(st), work, threads)
        exact = TorchEncoder(st).encode(list(PROBE_TEXTS), 4)
        check_agreement(encoder, exact, f"{backend} export", MIN_MEAN_COSINE, MIN_COSINE)
        write_probe(work, exact)
        seal_export(work)
        with contextlib.suppress(OSError):  # another process published first: theirs is used
            work.rename(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("encoder: exported %s to %s", backend, folder)


PROBE = "probe.json"  # in an export: fp32 torch's vectors of PROBE_TEXTS


def write_probe(folder: Path, exact: np.ndarray) -> None:
    cache.write_record(folder / PROBE, np.asarray(exact, dtype=np.float64).tolist())


def read_probe(folder: Path) -> np.ndarray | None:
    """fp32 torch's vectors of PROBE_TEXTS kept in an export; None where there are none
    (an export of an earlier paperlake) or they fail their digest."""
    try:
        found = np.asarray(cache.read_record(folder / PROBE), dtype=np.float32)
    except (FileNotFoundError, cache.Damaged, ValueError, TypeError):
        return None
    return found if found.ndim == 2 and len(found) == len(PROBE_TEXTS) else None


def cpu_key() -> str:
    """This CPU's model and flags: a reduced precision checked on one CPU holds on its kind."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    wanted = [line for line in lines if line.startswith(("model name", "flags"))][:2]
    return hashlib.sha256("\n".join(wanted).encode()).hexdigest()[:16]


def check_record(folder: Path, precision: str) -> Path:
    """Where a passed check of `precision` on this kind of CPU is recorded in an export."""
    return folder / f"checked-{precision}-{cpu_key()}.json"


def exported_encoder(
    st: Any,
    path: Path,
    weights_sha256: str,
    precision: str,
    cache: Path,
    threads: int,
    min_mean_cosine: float = MIN_MEAN_COSINE,
    min_cosine: float = MIN_COSINE,
) -> GraphEncoder:
    """The model run at `precision` (a key of EXPORTED), exported now unless on disk.

    The load is checked against fp32 torch on PROBE_TEXTS (a few tenths of a second): a
    reduced precision is judged on the CPU that runs it. An export on disk that cannot be
    loaded, or whose vectors are not finite or stray, is made again once (a damaged file,
    not the backend, is the likely cause). A passed check is recorded in the export, with
    the model's dimension, when `tokenizers` alone also tokenizes as the model does: later
    processes then load it by `ready_encoder`, without torch.

    Raises:
        RuntimeError: the vectors do not agree with fp32 torch within the bounds.
    """
    folder = export_folder(cache, EXPORTED[precision], weights_sha256)
    exact = TorchEncoder(st).encode(list(PROBE_TEXTS), 4)
    if folder.exists():
        try:
            if problem := verify_export(folder):
                raise RuntimeError(problem)
            encoder = LOADERS[precision](st_features(st), folder, threads)
            mean, least = check_agreement(encoder, exact, precision, min_mean_cosine, min_cosine)
        except Exception as exc:  # noqa: BLE001 - any failure of a file on disk: made again
            log.warning("encoder: the %s export fails (%s): made again", precision, exc)
            shutil.rmtree(folder, ignore_errors=True)
    if not folder.exists():
        export(st, path, EXPORTED[precision], folder, threads)
        encoder = LOADERS[precision](st_features(st), folder, threads)
        mean, least = check_agreement(encoder, exact, precision, min_mean_cosine, min_cosine)
    if read_probe(folder) is None:  # an export made before probes were kept
        write_probe(folder, exact)
    record = check_record(folder, precision)
    if not record.exists() and same_features(st, path):
        dim = int(encoder.encode([PROBE_TEXTS[0]], 1).shape[1])
        tmp = record.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"mean_cosine": mean, "min_cosine": least, "dim": dim}))
        os.replace(tmp, record)
    return encoder


def recorded_check(weights_sha256: str, precision: str, cache: Path) -> dict | None:
    """The passed check of the export of these weights at `precision` on this kind of CPU
    (`exported_encoder`), as a run's agreement record; None where none is recorded."""
    if precision not in EXPORTED:
        return None
    record = check_record(export_folder(cache, EXPORTED[precision], weights_sha256), precision)
    try:
        found = json.loads(record.read_text())
        mean, least = float(found["mean_cosine"]), float(found["min_cosine"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {
        "sample": len(PROBE_TEXTS),
        "mean_cosine": round(mean, 6),
        "min_cosine": round(least, 6),
        "reference": "fp32",
        "checked": "export, on this kind of CPU",
    }


def ready_encoder(
    path: Path, weights_sha256: str, precision: str, cache: Path, threads: int
) -> tuple[GraphEncoder, int] | None:
    """The export of these weights at `precision` and its dimension, loaded without torch,
    where one was made and checked on this kind of CPU (see `exported_encoder`); else None.
    """
    if precision not in EXPORTED:
        return None
    record = check_record(export_folder(cache, EXPORTED[precision], weights_sha256), precision)
    try:
        dim = int(json.loads(record.read_text())["dim"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    probe = read_probe(record.parent)
    if probe is None:  # checked with torch once more, which keeps a probe
        return None
    if problem := verify_export(record.parent):
        raise RuntimeError(f"the {precision} export is damaged: {problem}")
    encoder = LOADERS[precision](tokenizer_features(path), record.parent, threads)
    encoder.tokenizer = path  # fed by tokenizer.json alone: it takes `tokenize`'s tokens
    # The short probes only: a damaged export gives NaN or stray vectors for them too.
    check_agreement(encoder, probe[:2], f"{precision} export", MIN_MEAN_COSINE, MIN_COSINE)
    return encoder, dim
