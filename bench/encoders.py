"""Encoders side by side on the bench corpus: texts/s and agreement with fp32 torch.

Each precision (torch fp32 and bf16; OpenVINO fp32 and bf16, ONNX Runtime fp32) encodes
the same N abstracts through `flows.embed.encode`, in turns, several rounds, so that a slow
spell of a shared machine falls on all of them; the median round is reported. Exports are
made (or found) in the encoder cache first, and their time reported apart.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from corpus import abstracts  # noqa: E402

from flows import embed  # noqa: E402
from flows.core.settings import PACKAGED_MODEL  # noqa: E402
from flows.embed import MIN_COSINE, MIN_MEAN_COSINE  # noqa: E402

PRECISIONS = ("fp32", "bf16", "onnx-fp32", "openvino-fp32", "openvino-bf16")


def cpu_flags() -> str:
    """The CPU's name and the flags that decide the encoder."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    names = [line.split(":", 1)[1].strip() for line in text.splitlines() if "model name" in line]
    wanted = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")
    flags = set(text.split())
    return f"{names[0] if names else '?'}: " + " ".join(f for f in wanted if f in flags)


def timed_encode(texts: list[str], precision: str, batch_size: int) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    vectors = embed.encode(texts, precision=precision, batch_size=batch_size, show_progress=False)
    return vectors, len(texts) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="abstracts in the corpus")
    parser.add_argument("--rounds", type=int, default=3, help="turns of every encoder")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS))
    args = parser.parse_args()

    texts = abstracts(args.n)
    rows: dict[str, dict] = {}
    for precision in args.precisions:
        start = time.perf_counter()
        _, info = embed.load_model(PACKAGED_MODEL, "cpu", precision)
        rows[precision] = {"recorded": info.precision, "load_s": time.perf_counter() - start}
        embed.encode(texts[:8], precision=precision, show_progress=False)  # warm-up
    # What `auto` picks here, loaded last so that its export (if any) is already made.
    auto = embed.load_model(PACKAGED_MODEL, "cpu", "auto")[1].precision

    vectors: dict[str, np.ndarray] = {}
    for _ in range(args.rounds):
        for precision in args.precisions:
            out, rate = timed_encode(texts, precision, args.batch_size)
            rows[precision].setdefault("rates", []).append(rate)
            if precision in vectors:
                rows[precision]["deterministic"] = bool(np.array_equal(out, vectors[precision]))
            vectors[precision] = out
    exact = vectors.get("fp32")
    if exact is None:
        exact, _ = timed_encode(texts, "fp32", args.batch_size)
    for precision, row in rows.items():
        cosine = np.sum(vectors[precision] * exact, axis=1)
        row.update(
            texts_per_s=float(np.median(row["rates"])),
            mean_cosine=float(cosine.mean()),
            min_cosine=float(cosine.min()),
        )

    print(f"encoders on {args.n} bench abstracts, batch {args.batch_size}, {cpu_flags()}")
    print(f"auto picks {auto} here")
    base = rows.get("fp32", {}).get("texts_per_s")
    print(
        f"{'precision':<15}{'recorded':<15}{'load s':>8}{'texts/s':>9}{'x fp32':>8}"
        f"{'mean cos':>11}{'min cos':>11}  exact  same bits  rounds (texts/s)"
    )
    for precision, row in rows.items():
        ok = row["mean_cosine"] >= MIN_MEAN_COSINE and row["min_cosine"] >= MIN_COSINE
        speedup = f"{row['texts_per_s'] / base:8.2f}" if base else f"{'':>8}"
        print(
            f"{precision:<15}{row['recorded']:<15}{row['load_s']:8.1f}{row['texts_per_s']:9.1f}"
            f"{speedup}{row['mean_cosine']:11.6f}{row['min_cosine']:11.6f}  "
            f"{'yes' if ok else 'NO ':<5}  {str(row.get('deterministic', '-')):<9}  "
            + " ".join(f"{r:.1f}" for r in row["rates"])
        )
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    report = {"n": args.n, "cpu": cpu_flags(), "auto": auto, "encoders": rows}
    (out / f"encoders-{args.n}.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
