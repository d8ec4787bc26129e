"""The model as one graph: the sentence-transformers pipeline (transformer, pooling,
normalisation) exported for OpenVINO or ONNX Runtime, weights kept in fp32."""

from __future__ import annotations

import contextlib
import json
import logging
import warnings
from pathlib import Path
from typing import Any

from flows.core import cache
from flows.embed.tokens import PROBE_TEXTS

log = logging.getLogger("paperlake")


def input_names(st: Any) -> tuple[str, ...]:
    """The tensors the model's tokenizer gives (input_ids, attention_mask, ...)."""
    import torch

    features = st.preprocess(list(PROBE_TEXTS[:2]))
    return tuple(name for name, value in features.items() if isinstance(value, torch.Tensor))


def whole_model(st: Any, names: tuple[str, ...]):
    """The sentence-transformers pipeline (transformer, pooling, normalise) as one module
    taking its input tensors positionally, as exporters want them."""
    import torch

    class Pipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.st = st

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            return self.st(dict(zip(names, tensors, strict=True)))["sentence_embedding"]

    return Pipeline().eval()


def export_openvino(st: Any, folder: Path) -> None:
    """OpenVINO IR of the whole model, weights kept in fp32, into `folder`."""
    import openvino as ov
    import torch

    names = input_names(st)
    example = st.preprocess(list(PROBE_TEXTS[:2]))
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on constant shape checks
        graph = ov.convert_model(
            whole_model(st, names),
            example_input=tuple(example[name] for name in names),
            input=[(ov.PartialShape([-1, -1]), ov.Type.i64)] * len(names),
        )
    for port, name in zip(graph.inputs, names, strict=True):
        port.get_tensor().set_names({name})
    # save_model stores weights as fp16 unless told not to: the vectors would change.
    ov.save_model(graph, folder / "model.xml", compress_to_fp16=False)


def export_onnx(path: Path, folder: Path) -> None:
    """ONNX graph of the whole model with ONNX Runtime's fp32 transformer fusions."""
    import torch
    from onnxruntime.transformers.optimizer import optimize_model
    from sentence_transformers import SentenceTransformer

    # Eager attention exports as MatMul/Softmax, the pattern ONNX Runtime fuses into its
    # Attention kernel; the SDPA export stays unfused and ran slower (bench/encoders.py).
    st = SentenceTransformer(str(path), device="cpu", model_kwargs={"attn_implementation": "eager"})
    names = input_names(st)
    example = st.preprocess(list(PROBE_TEXTS[:2]))
    raw = folder / "raw.onnx"
    axes = {name: {0: "batch", 1: "tokens"} for name in names}
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on constant shape checks
        # The TorchScript exporter: the torch.export one needs onnxscript, another 10 MB.
        torch.onnx.export(
            whole_model(st, names),
            tuple(example[name] for name in names),
            str(raw),
            dynamo=False,
            input_names=list(names),
            output_names=["sentence_embedding"],
            dynamic_axes={**axes, "sentence_embedding": {0: "batch"}},
            opset_version=17,
        )
    # The optimizer cannot read the head count from this graph: without it, no Attention.
    config = json.loads((path / "config.json").read_text())
    # Fusions only: no fp16 conversion, no GELU approximation (both change the vectors).
    optimized = optimize_model(
        str(raw),
        model_type="bert",
        num_heads=config["num_attention_heads"],
        hidden_size=config["hidden_size"],
        opt_level=1,
        use_gpu=False,
    )
    if not optimized.get_fused_operator_statistics().get("Attention"):
        log.info("encoder: ONNX Runtime fused no attention in %s", path.name)
    optimized.save_model_to_file(str(folder / "model.onnx"))
    raw.unlink()


SEAL = "seal.json"  # in an export: each graph file's sha256, and its stat when last hashed
GRAPH_FILES = ("model.xml", "model.bin", "model.onnx")


def seal_export(folder: Path) -> None:
    """Record each graph file's sha256 and stat in the export (`verify_export`)."""
    files = {}
    for name in GRAPH_FILES:
        if (folder / name).is_file():
            files[name] = {
                "sha256": cache.file_sha256(folder / name),
                "stat": stat_of(folder / name),
            }
    cache.write_record(folder / SEAL, files)


def stat_of(path: Path) -> list[int]:
    found = path.stat()
    return [found.st_size, found.st_mtime_ns, found.st_ino]


def verify_export(folder: Path) -> str | None:
    """Why the export's graph files cannot be trusted (a file whose bytes differ from its
    seal, or gone); None where they can. A file whose stat is as when last hashed is not
    hashed again; one whose stat changed is, and its seal keeps the new stat where the
    bytes still match. An export of an earlier paperlake, without a seal, is sealed now
    (its probe check stands for it)."""
    try:
        files = cache.read_record(folder / SEAL)
    except FileNotFoundError:
        seal_export(folder)
        return None
    except cache.Damaged as damage:
        return f"its seal: {damage.reason}"
    restat = False
    for name, spec in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if stat_of(path) == spec["stat"]:
            continue
        if cache.file_sha256(path) != spec["sha256"]:
            return f"{name} differs from its seal"
        spec["stat"], restat = stat_of(path), True
    if restat:
        with contextlib.suppress(OSError):  # a cache not ours to write: hashed each time
            cache.write_record(folder / SEAL, files)
    return None
