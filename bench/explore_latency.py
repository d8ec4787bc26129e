"""Latency of the explorer's /api/search: start `paperlake explore`, ask 20 queries over
HTTP as the page does, print the median and the slowest, and the explorer's memory (its
peak resident set, and what it holds after the queries).

    .venv/bin/python bench/explore_latency.py --warehouse /tmp/explore-wh
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.parse
import urllib.request
from pathlib import Path

from explorer_process import explorer

QUERIES = (
    "reinforcement learning from human feedback", "diffusion models for planning",
    "speculative decoding latency", "flow matching generative model", "quantization of llms",
    "synthetic data model collapse", "reward models for alignment", "graph neural networks",
    "autonomous driving trajectory", "benchmark for reasoning", "medical agents",
    "protein structure", "robot manipulation", "vision language models", "sparse attention",
    "federated learning privacy", "mixture of experts", "text to image pruning",
    "advertising auto-bidding", "hyperparameter optimisation",
)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", "-w", required=True)
    parser.add_argument("--mode", default="hybrid")
    args = parser.parse_args()
    started = time.perf_counter()
    with explorer(args.warehouse, stop_within=30) as (base, server):
        ready = time.perf_counter() - started
        seconds = []
        for text in QUERIES:
            url = f"{base}api/search?" + urllib.parse.urlencode({"q": text, "mode": args.mode})
            t = time.perf_counter()
            with urllib.request.urlopen(url) as response:
                hits = json.load(response)["hits"]
            seconds.append(time.perf_counter() - t)
            assert hits, text
        memory = resident(server.pid)
    ms = sorted(1000 * s for s in seconds)
    print(f"explorer ready (model and index warm) in {ready:.1f} s")
    median = statistics.median(ms)
    print(
        f"/api/search ({args.mode}) over {len(ms)} requests: median {median:.1f} ms, "
        f"fastest {ms[0]:.1f} ms, slowest {ms[-1]:.1f} ms"
    )
    print(
        f"explorer memory: peak {memory['VmHWM']:.2f} GB, "
        f"after the queries {memory['VmRSS']:.2f} GB"
    )


def resident(pid: int) -> dict[str, float]:
    """A process's peak and current resident set (VmHWM, VmRSS), GB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            found[key] = int(value.split()[0]) / 1024**2
    return found


if __name__ == "__main__":
    main()
