"""Reduced precision held to fp32: a sample of a run's vectors against fp32 vectors of the
same texts."""

from __future__ import annotations

import numpy as np
import polars as pl

from flows.embed.model import load_model
from flows.embed.vectors import encode

AGREEMENT_SAMPLE = 8


def fp32_reference(precision: str) -> str:
    """What a run's vectors are compared with: for OpenVINO's bf16, its fp32 run of the same
    export (itself held to fp32 torch within MIN_COSINE when it was checked), else fp32
    torch."""
    return "openvino-fp32" if precision == "openvino-bf16" else "fp32"


def reduced_precision(precision: str) -> bool:
    """Whether `precision` computes in fewer bits than fp32 (bf16, fp16): its runs check a
    sample of their vectors against fp32. An fp32 export computes what fp32 torch does, in
    another order; its check when it was made on this kind of CPU is its record."""
    return not precision.endswith("fp32")


def warm_up(model: str, device: str = "auto", precision: str = "auto") -> None:
    """Load the model now, and the fp32 model its agreement check encodes with where the
    model runs at reduced precision (a cold run would otherwise load it mid-embed)."""
    _, info = load_model(model, device, precision)
    if reduced_precision(info.precision):
        load_model(model, device, fp32_reference(info.precision))


def pick_sample(
    todo: pl.DataFrame, vectors: np.ndarray | None, fresh: pl.Series
) -> tuple[list[str], np.ndarray]:
    """Up to AGREEMENT_SAMPLE texts of `todo`, spread over it, and their vectors.

    Args:
        vectors: the texts' vectors where encoded here; None where workers encoded them
            into the cache, and `fresh` holds them as read back.
    """
    pick = np.linspace(0, todo.height - 1, min(AGREEMENT_SAMPLE, todo.height)).astype(int)
    texts = [todo["text"][int(i)] for i in pick]
    if vectors is not None:
        return texts, vectors[pick]
    return texts, np.asarray(fresh.gather(pick).to_list(), dtype=np.float32)


def agreement_with_fp32(
    texts: list[str], vectors: np.ndarray, model: str, device: str, precision: str
) -> dict:
    """Cosine of vectors made at reduced precision to fp32 vectors of the same texts."""
    reference = fp32_reference(precision)
    exact = encode(texts, model, batch_size=len(texts), device=device, precision=reference,
                   show_progress=False)  # fmt: skip
    cosine = np.sum(vectors * exact, axis=1)
    return {
        "sample": len(texts),
        "mean_cosine": round(float(cosine.mean()), 6),
        "min_cosine": round(float(cosine.min()), 6),
        "reference": reference,
    }
