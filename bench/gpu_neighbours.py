"""Exact top-k neighbours with torch on a GPU, for bench/gpu_check.sh: blockwise products
in fp16 pick candidates, fp32 dot products rank them (as the neighbour stage's products
pick and `pair_scores` scores), self excluded.

Kept here, not in flows/derive: the stage's exact search also feeds near-duplicate pairs,
ranks ties by column and scores in float64 for bits equal across workers; this measures
what a GPU would give it first.
"""

from __future__ import annotations

import time

import numpy as np
import torch

BLOCK_ROWS = 4096  # query rows a product: 4096 x 1M fp16 scores is 8 GB


def top_k(
    vectors: torch.Tensor, k: int, fetch: int | None = None, block: int = BLOCK_ROWS
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's k nearest other rows of unit `vectors` (n x d, on its device): columns
    (int64) and cosines (float32), best first.

    Each block's fp16 products pick `fetch` (2k) candidates a row; their fp32 dot products
    rank them, so fp16 rounding (about 5e-4 near 1) decides no order among the k.
    """
    fetch = min(fetch or 2 * k, len(vectors) - 1)
    half = vectors.to(torch.float16)
    exact = vectors.to(torch.float32)
    n = len(vectors)
    cols = torch.empty((n, k), dtype=torch.int64, device=vectors.device)
    scores = torch.empty((n, k), dtype=torch.float32, device=vectors.device)
    for start in range(0, n, block):
        rows = torch.arange(start, min(start + block, n), device=vectors.device)
        products = half[rows] @ half.T
        products[torch.arange(len(rows), device=vectors.device), rows] = -torch.inf
        picked = torch.topk(products, fetch, dim=1, sorted=False).indices
        rescored = torch.einsum("rd,rcd->rc", exact[rows], exact[picked])
        best, at = torch.topk(rescored, k, dim=1)
        cols[rows], scores[rows] = torch.gather(picked, 1, at), best
    return cols, scores


def spread_copies(base: np.ndarray, n: int, noise: float = 0.02, seed: int = 0) -> np.ndarray:
    """n unit vectors: `base` tiled to n rows, each copy after the first moved by Gaussian
    noise of `noise` a coordinate and normalised (a corpus of n real-looking papers)."""
    rng = np.random.default_rng(seed)
    tiled = np.resize(base, (n, base.shape[1])).astype(np.float32)
    tiled[len(base) :] += rng.standard_normal((n - len(base), base.shape[1]), np.float32) * noise
    tiled /= np.linalg.norm(tiled, axis=1, keepdims=True)
    return tiled


def recall_against_numpy(
    vectors: np.ndarray, cols: np.ndarray, k: int, probes: int, seed: int = 0
) -> float:
    """Share of the true k nearest (float32 numpy, self excluded) that `cols` lists, over
    `probes` rows drawn at random."""
    rows = np.random.default_rng(seed).choice(len(vectors), min(probes, len(vectors)), False)
    products = vectors[rows] @ vectors.T
    products[np.arange(len(rows)), rows] = -np.inf
    truth = np.argpartition(-products, k - 1, axis=1)[:, :k]
    found = sum(len(set(t) & set(c)) for t, c in zip(truth, cols[rows], strict=True))
    return found / (len(rows) * k)


def timed_search(base: np.ndarray, n: int, k: int, device: str, probes: int = 256) -> dict:
    """Exact top-k over n vectors spread from `base`, on `device`: seconds, rate, recall."""
    vectors = spread_copies(base, n)
    on_device = torch.from_numpy(vectors).to(device)
    top_k(on_device[: min(n, 8192)], k)  # warm-up: kernels chosen, memory pooled
    sync(device)
    start = time.perf_counter()
    cols, scores = top_k(on_device, k)
    cols, scores = cols.cpu().numpy(), scores.cpu().numpy()
    seconds = time.perf_counter() - start
    return {
        "n": n,
        "k": k,
        "block_rows": BLOCK_ROWS,
        "seconds": round(seconds, 3),
        "rows_per_s": round(n / seconds, 1),
        "recall_at_k_vs_fp32_numpy": round(recall_against_numpy(vectors, cols, k, probes), 4),
        "probes": min(probes, n),
        "mean_top1_cosine": round(float(scores[:, 0].mean()), 4),
    }


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
