"""The embed stage's own encoding on a GPU, for bench/gpu_check.sh: throughput end to end
(texts in, unit float32 vectors out), beside plain sentence-transformers, agreement with
fp32, and exact neighbours of a million vectors with torch.

Needs only torch, sentence-transformers, tokenizers and numpy: it imports the stage's
encoding modules (flows/embed/batches.py, encoders.py, tokens.py), which load without
polars, DuckDB, Prefect or pydantic. Writes gpu_check.json to $OUT where set, else to
bench/out/, and prints it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from importlib.metadata import version
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import numpy as np  # noqa: E402
import torch  # noqa: E402
from gpu_neighbours import sync, timed_search  # noqa: E402
from gpu_texts import load  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

from flows.embed.batches import encode_in_order, lengths_in_tokens, longest_first  # noqa: E402
from flows.embed.encoders import TorchEncoder, embedding_dimension, torch_encoder  # noqa: E402
from flows.embed.tokens import max_seq_length  # noqa: E402

PAYLOAD = ROOT / ".gpu-check"


def pipeline(
    encoder: TorchEncoder, model: Path, texts: list[str], batch: int, overlap: bool = True
) -> tuple[np.ndarray, float]:
    """The stage's encode of `texts`, as `flows.embed.encode` runs it with a torch encoder:
    token lengths counted, longest first, chunks of batches (on a GPU fed tokenized
    batches, the next chunk tokenized meanwhile). Vectors and seconds, end to end."""
    device = encoder.st.device.type
    dim = embedding_dimension(encoder.st)
    sync(device)
    start = time.perf_counter()
    order = longest_first(lengths_in_tokens(model, texts))
    vectors = encode_in_order(encoder, texts, order, batch, dim, overlap=overlap)
    sync(device)
    return vectors, time.perf_counter() - start


def rate(n: int, seconds: float) -> dict:
    return {"n": n, "seconds": round(seconds, 3), "abstracts_per_s": round(n / seconds, 1)}


def top_overlap(a: np.ndarray, b: np.ndarray, k: int = 10) -> float:
    """Mean share of each row's k nearest rows (self excluded) by `a` that `b` finds too."""
    found = []
    for vectors in (a, b):
        products = vectors @ vectors.T
        np.fill_diagonal(products, -np.inf)
        found.append(np.argpartition(-products, k - 1, axis=1)[:, :k])
    return float(np.mean([len(set(x) & set(y)) / k for x, y in zip(*found, strict=True)]))


def agreement(fast: np.ndarray, exact: np.ndarray) -> dict:
    cosine = np.sum(fast * exact, axis=1)
    return {
        "sample": len(fast),
        "mean_cosine": round(float(cosine.mean()), 6),
        "min_cosine": round(float(cosine.min()), 6),
        "top10_overlap": round(top_overlap(fast, exact), 4),
    }


def plain_st(model: Path, texts: list[str], device: str) -> dict:
    """`SentenceTransformer(model, device=...).encode(texts)` at its defaults (batch 32); in
    fp32, as a packaged fp32 model loads (the carried weights are fp16)."""
    st = SentenceTransformer(str(model), device=device).float()
    st.encode(texts[:256])  # warm-up
    sync(device)
    start = time.perf_counter()
    st.encode(texts)
    sync(device)
    return rate(len(texts), time.perf_counter() - start) | {"batch": 32, "dtype": "float32"}


def machine(device: str) -> dict:
    found = {"device": device, "torch": torch.__version__}
    found["sentence_transformers"] = version("sentence-transformers")
    if device == "cuda":
        found["gpu"] = torch.cuda.get_device_name(0)
    else:
        found["cpu_threads"] = torch.get_num_threads()
    return found


def embed_section(args: argparse.Namespace, texts: list[str], report: dict) -> np.ndarray:
    """Pipeline throughput with and without the overlap, plain sentence-transformers, and
    agreement with fp32 on a sample; the pipeline's vectors."""
    encoder = torch_encoder(args.model, args.device, args.precision)
    # The fed path (prepare/run) is what a GPU runs; on a CPU the stage keeps
    # sentence-transformers' batches, and this dry run feeds it as a GPU would.
    encoder = dataclasses.replace(encoder, fed=True)
    pipeline(encoder, args.model, texts[: 4 * args.batch], args.batch)  # warm-up
    vectors, seconds = pipeline(encoder, args.model, texts, args.batch)
    _, serial = pipeline(encoder, args.model, texts, args.batch, overlap=False)
    report["pipeline"] = rate(len(texts), seconds) | {
        "precision": args.precision, "batch": args.batch,
        "without_overlap": rate(len(texts), serial),
    }  # fmt: skip
    report["plain_sentence_transformers"] = plain_st(args.model, texts[: args.plain], args.device)
    sample = texts[: args.sample]
    fp32 = dataclasses.replace(torch_encoder(args.model, args.device, "fp32"), fed=True)
    exact, _ = pipeline(fp32, args.model, sample, args.batch)
    # Encoded alone, the sample meets other batch companions than in the whole run: the
    # agreement counts the run's own vectors.
    report["agreement_with_fp32"] = agreement(vectors[: args.sample], exact)
    if args.reference:  # the fp32 weights the carried fp16 ones were made from
        full = dataclasses.replace(torch_encoder(args.reference, args.device, "fp32"), fed=True)
        original, _ = pipeline(full, args.reference, sample, args.batch)
        report["agreement_with_fp32"]["fp16_weights_vs_fp32_weights"] = agreement(exact, original)
    return vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=PAYLOAD / "model")
    parser.add_argument("--texts", type=Path, default=PAYLOAD / "abstracts.txt.xz")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", help="fp16 on a GPU, bf16 on a CPU")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--plain", type=int, default=20_000, help="texts plain ST encodes")
    parser.add_argument("--sample", type=int, default=5_000, help="texts checked with fp32")
    parser.add_argument("--neighbours", type=int, default=1_000_000)
    parser.add_argument("--reference", type=Path, help="fp32 model folder, where at hand")
    args = parser.parse_args()
    args.precision = args.precision or ("fp16" if args.device == "cuda" else "bf16")
    wall = time.perf_counter()
    texts = load(args.texts, args.n)
    report: dict = machine(args.device) | {"texts": str(args.texts.name)}
    report["tokens"] = token_stats(args.model, texts)
    vectors = embed_section(args, texts, report)
    report["goal_met"] = (  # 20,000 abstracts/s end to end, cosine >= 0.999 (on an H200)
        report["pipeline"]["abstracts_per_s"] >= 20_000
        and report["agreement_with_fp32"]["min_cosine"] >= 0.999
    )
    report["exact_neighbours"] = timed_search(vectors, args.neighbours, 10, args.device)
    report["wall_seconds"] = round(time.perf_counter() - wall, 1)
    out = Path(os.environ.get("OUT") or ROOT / "bench" / "out")
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(report, indent=2)
    (out / "gpu_check.json").write_text(text + "\n")
    print(text)


def token_stats(model: Path, texts: list[str]) -> dict:
    lengths = lengths_in_tokens(model, texts)
    return {
        "n": len(texts),
        "mean": round(float(lengths.mean()), 1),
        "p50": int(np.median(lengths)),
        "truncated_share": round(float((lengths >= max_seq_length(model)).mean()), 3),
    }


if __name__ == "__main__":
    main()
