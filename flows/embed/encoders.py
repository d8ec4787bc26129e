"""Encoders: one sentence-transformers model run by torch, OpenVINO or ONNX Runtime.

Exported graphs (flows/embed/exports.py) compute in fp32, or in bf16 where the CPU has it
(openvino-bf16); each precision here names the export it runs and how it is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from flows.embed.tokens import Features, Tokens


class Encoder(Protocol):
    """Makes sentence vectors (float32, one row a text) of texts in the batches given."""

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray: ...


DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclass
class TorchEncoder:
    """sentence-transformers' own encode, in the model's dtype (fp32, or bf16 where native).

    `fed` (on a GPU): batches are tokenized apart from the model's run (`prepare`, then
    `run`), so the next ones can be tokenized while the GPU computes these
    (flows/embed/batches.py). On the CPU `encode` keeps sentence-transformers' own batches,
    and with them the vectors published before.
    """

    st: Any
    fed: bool = False

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        import torch  # loaded already: `st` is a torch model

        with torch.inference_mode():
            vectors = self.st.encode(
                texts,
                batch_size=batch_size,
                convert_to_numpy=False,
                convert_to_tensor=True,
                show_progress_bar=False,
            )
        return vectors.float().cpu().numpy()

    def prepare(self, texts: list[str], batch_size: int) -> list[dict[str, Any]]:
        """The model's input tensors for `texts`, in batches cut in the order given; in
        pinned memory where the model is on a GPU, so `run` copies them without waiting."""
        import torch

        pin = self.st.device.type == "cuda"
        batches = []
        for start in range(0, len(texts), batch_size):
            features = self.st.preprocess(texts[start : start + batch_size])
            tensors = {k: v for k, v in features.items() if isinstance(v, torch.Tensor)}
            batches.append({k: v.pin_memory() if pin else v for k, v in tensors.items()})
        return batches

    def run(self, batches: list[dict[str, Any]]) -> np.ndarray:
        """Sentence vectors (float32, one row a text) of batches from `prepare`, in order."""
        import torch

        device = self.st.device
        out = []
        with torch.inference_mode():
            for features in batches:
                moved = {k: v.to(device, non_blocking=True) for k, v in features.items()}
                out.append(self.st(moved)["sentence_embedding"])
            return torch.cat(out).float().cpu().numpy()


def torch_encoder(path: Path, device: str, precision: str) -> TorchEncoder:
    """The sentence-transformers model in `path` on `device`, its weights cast once to
    `precision` (fp32, bf16 or fp16: fp32 computes in fp32 whatever dtype the weights
    were stored in); fed tokenized batches off the CPU."""
    import torch
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(path), device=device)
    if precision in DTYPES:
        st = st.to(getattr(torch, DTYPES[precision]))
    return TorchEncoder(st, fed=device != "cpu")


def embedding_dimension(st) -> int:
    """The model's output dimension (the method was renamed in sentence-transformers 6)."""
    getter = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
    return int(getter())


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


def openvino_encoder(features: Features, folder: Path, threads: int, hint: str) -> GraphEncoder:
    """The exported model compiled by OpenVINO for this CPU, computing in `hint` (f32, bf16),
    in streams: each of the `threads` cores runs a batch of its own, where one batch on all
    of them waits for the slowest (bench/encoders.py)."""
    import openvino as ov

    # Without the hint OpenVINO picks bf16 by itself on CPUs that have it.
    config = {
        "INFERENCE_PRECISION_HINT": hint,
        "INFERENCE_NUM_THREADS": threads,
        "PERFORMANCE_HINT": "THROUGHPUT",
        "NUM_STREAMS": threads,
    }
    core = ov.Core()
    if os.access(folder, os.W_OK):  # compiled once, then loaded, faster than compiled
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


# Each precision: the export it runs and how it loads one.
# Each loader takes the tokenizer as a Features function.
LOADERS: dict[str, Callable[[Features, Path, int], GraphEncoder]] = {
    "openvino-fp32": partial(openvino_encoder, hint="f32"),
    "openvino-bf16": partial(openvino_encoder, hint="bf16"),
    "onnx-fp32": onnx_encoder,
}
EXPORTED = {"openvino-fp32": "openvino", "openvino-bf16": "openvino", "onnx-fp32": "onnxruntime"}
