"""Embedding throughput and agreement on a GPU, for bench/gpu_check.sh.

Needs only torch, sentence-transformers and numpy (what the GPU machine has). Embeds N
generated abstracts (bench/corpus.py) the way paperlake does on CUDA (half-precision
weights, longest texts first, large batches) and compares a sample with fp32 vectors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from corpus import abstracts  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402


def encode(model: SentenceTransformer, texts: list[str], batch: int) -> tuple[np.ndarray, float]:
    order = np.argsort([-len(t) for t in texts], kind="stable")
    out = np.zeros((len(texts), model.get_embedding_dimension()), dtype=np.float32)
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(texts), batch * 8):
            idx = order[i : i + batch * 8]
            vecs = model.encode([texts[j] for j in idx], batch_size=batch, convert_to_tensor=True)
            out[idx] = vecs.float().cpu().numpy()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--sample", type=int, default=5000)
    args = parser.parse_args()
    texts = abstracts(args.n)
    report: dict = {"n": args.n, "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    exact_model = SentenceTransformer(str(args.model), device="cuda").float()
    encode(exact_model, texts[:1024], args.batch)  # warm-up
    sample = texts[: args.sample]
    exact, _ = encode(exact_model, sample, args.batch)
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        model = SentenceTransformer(str(args.model), device="cuda").to(dtype)
        encode(model, texts[:1024], args.batch)
        vectors, seconds = encode(model, texts, args.batch)
        cosine = np.sum(vectors[: args.sample] * exact, axis=1)
        report[name] = {
            "seconds": round(seconds, 2),
            "abstracts_per_s": round(args.n / seconds, 1),
            "mean_cosine_vs_fp32": float(cosine.mean()),
            "min_cosine_vs_fp32": float(cosine.min()),
        }
    _, fp32_seconds = encode(exact_model, texts[: args.sample], args.batch)
    report["fp32"] = {"abstracts_per_s": round(args.sample / fp32_seconds, 1)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
