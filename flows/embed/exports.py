"""Exports: the model as one graph for OpenVINO or ONNX Runtime, made once per machine.

Exported graphs hold fp32 weights (no quantisation, no fp16), are made from the model's own
weights and kept on disk under a key of the weights' sha256 and the library versions that
made them. An export is checked against fp32 torch before its first use on a kind of CPU;
the passed check is recorded in it, and later processes load it with `tokenizers` and the
runtime alone, without importing torch.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from flows.core import cache
from flows.embed.encoders import EXPORTED, LOADERS, Encoder, GraphEncoder, TorchEncoder
from flows.embed.graphs import export_onnx, export_openvino, seal_export, verify_export
from flows.embed.machine import cpu_key
from flows.embed.tokens import PROBE_TEXTS, same_features, st_features, tokenizer_features

# An export is kept only when its vectors agree with fp32 torch this closely (cosine).
MIN_MEAN_COSINE = 0.9999
MIN_COSINE = 0.999
log = logging.getLogger("paperlake")

EXPORTERS: dict[str, Callable[[Any, Path, Path], None]] = {
    "openvino": lambda st, path, folder: export_openvino(st, folder),
    "onnxruntime": lambda st, path, folder: export_onnx(path, folder),
}


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

    The load is checked against fp32 torch on PROBE_TEXTS: a reduced precision is judged
    on the CPU that runs it. An export on disk that cannot be loaded, or whose vectors are
    not finite or stray, is made again once (a damaged file, not the backend, is the likely
    cause). A passed check is recorded in the export, with
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
