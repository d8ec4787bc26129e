"""`make bench`: paperlake against the hand-written baseline, side by side in one run.

Generates a deterministic corpus of N abstracts (real sentences from data/raw recombined),
then times, each as its own process: the baseline (bench/baseline.py), paperlake cold
(new warehouse), warm (nothing changed) and incremental (+1% new abstracts). Prints ratios,
embedding throughput, seconds per stage, peak RSS and the agreement of paperlake's vectors
with fp32. `--scaling` times the neighbour stage alone at N and 10 N: paperlake's exact
and HNSW methods (with HNSW's recall) and the baseline's self-join, on paperlake's own
vectors of the bench abstracts (computed once, kept in bench/out/).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from corpus import abstracts, write_dump  # noqa: E402

PAPERLAKE = Path(sys.executable).parent / "paperlake"
REPEATS = 3
WARM_IMPORTS = (
    "import torch, sentence_transformers, duckdb, pandas, polars, prefect, "
    "great_expectations, sklearn, prefect.server.api.server, openvino"
)


def timed(cmd: list[str], watch: Callable[[subprocess.Popen], str | None] | None = None,
          **kwargs) -> dict:  # fmt: skip
    """Run a command; its wall seconds, CPU seconds (user and system, with the processes
    it waited for), peak RSS (MB), exit code and output.

    `watch(process)`, where given, runs beside the command until it ends; a reason it
    returns (it stopped the command) is raised as MemoryError with the output.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs
    )
    stopped: list[str | None] = []
    watcher = threading.Thread(target=lambda: stopped.append(watch(proc)), daemon=True)
    if watch:
        watcher.start()
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if watch:
        watcher.join()
    if stopped and stopped[0]:
        raise MemoryError(f"{stopped[0]}:\n{output[-3000:]}")
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{output[-3000:]}")
    cpu = usage.ru_utime + usage.ru_stime
    return {"seconds": wall, "cpu_seconds": cpu, "peak_rss_mb": usage.ru_maxrss / 1024,
            "output": output}  # fmt: skip


def stage_figures(output: str, head: str) -> dict[str, float]:
    """A figure a stage from the run summary's line that starts with `head`."""
    match = re.search(rf"^{head}: (.*)$", output, re.M)
    pairs = re.findall(r"(\w+) ([\d.]+)", match.group(1)) if match else []
    return {name: float(value) for name, value in pairs}


def stage_seconds(output: str) -> dict[str, float]:
    return stage_figures(output, "seconds")


def stage_peaks(output: str) -> dict[str, float]:
    """The run's peak memory (GB) as each stage ended, from its summary line."""
    return stage_figures(output, "peak memory GB")


def stage_cpu(output: str) -> dict[str, float]:
    """The run process's CPU seconds a stage, from its summary line."""
    return stage_figures(output, "cpu seconds")


def embedded_count(output: str) -> int:
    match = re.search(r"embeddings computed: (\d+)", output)
    return int(match.group(1)) if match else -1


def agreement(warehouse: Path, sample: int, seed: int = 0) -> dict:
    """paperlake's vectors against fp32 vectors of the same texts, on a sample of papers."""
    from flows import embed
    from flows.core.lake import open_lake
    from flows.core.settings import Settings

    with open_lake(Settings(warehouse=warehouse), version=1) as con:
        rows = con.execute(
            "select p.paper_id, p.abstract, e.embedding from papers p "
            "join embeddings e using (paper_id) order by p.paper_id"
        ).fetchall()
    rng = np.random.default_rng(seed)
    pick = sorted(rng.choice(len(rows), size=min(sample, len(rows)), replace=False))
    texts = [rows[i][1] for i in pick]
    fast = np.asarray([rows[i][2] for i in pick], dtype=np.float32)
    exact = embed.encode(texts, precision="fp32", show_progress=False)
    cosine = np.sum(fast * exact, axis=1)

    def top10(v: np.ndarray) -> np.ndarray:
        sims = v @ v.T
        np.fill_diagonal(sims, -np.inf)
        return np.argsort(-sims, axis=1, kind="stable")[:, :10]

    a, b = top10(fast), top10(exact)
    overlap = np.mean([len(set(x) & set(y)) / 10 for x, y in zip(a, b, strict=True)])
    return {
        "sample": len(pick),
        "mean_cosine": float(cosine.mean()),
        "min_cosine": float(cosine.min()),
        "top10_overlap": float(overlap),
    }


def bench_vectors(n: int) -> np.ndarray:
    """paperlake's vectors of the first n bench abstracts, computed once and kept in bench/out."""
    from flows import embed

    out = ROOT / "bench" / "out"
    for path in sorted(out.glob("vectors-*.npy")):
        if int(path.stem.split("-")[1]) >= n:
            return np.load(path, mmap_mode="r")[:n]
    out.mkdir(exist_ok=True)
    vectors = embed.encode(abstracts(n))
    np.save(out / f"vectors-{n}.npy", vectors)
    return vectors


def recall_at(found, truth) -> float:
    pairs = set(found.select("paper_id", "neighbor_id").rows())
    expected = set(truth.select("paper_id", "neighbor_id").rows())
    return len(pairs & expected) / len(expected)


def neighbour_scaling(n: int, vectors: np.ndarray, baseline: bool = True) -> dict:
    """Seconds of the neighbour stage, each method, and of the baseline's SQL self-join at n."""
    import duckdb
    import polars as pl

    from flows.derive.neighbours import nearest

    vectors = np.array(vectors[:n], dtype=np.float32)  # a writable copy of the memory map
    ids = [f"p{i:07d}" for i in range(n)]
    row: dict = {"n": n}
    found = {}
    for method in ("exact", "hnsw"):
        nearest(ids[:100], vectors[:100], 10, 0.95, method)  # warm-up: first calls load code
        times = []
        for _ in range(REPEATS):  # best of a few: the small sizes take milliseconds
            start = time.perf_counter()
            found[method], _ = nearest(ids, vectors, 10, 0.95, method)
            times.append(time.perf_counter() - start)
        row[f"{method}_seconds"] = min(times)
    row["hnsw_recall_at_10"] = recall_at(found["hnsw"], found["exact"])
    if not baseline:
        return row
    frame = pl.DataFrame(
        {"paper_id": ids, "e": pl.Series(vectors, dtype=pl.Array(pl.Float32, vectors.shape[1]))}
    )
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("create table emb as select * from frame")
    start = time.perf_counter()
    con.execute(
        "create table knn as select a.paper_id, b.paper_id as neighbor_id, "
        "array_cosine_similarity(a.e, b.e) as score from emb a join emb b "
        "on a.paper_id <> b.paper_id "
        "qualify row_number() over (partition by a.paper_id order by score desc) <= 10"
    )
    row["baseline_seconds"] = time.perf_counter() - start
    return row


def scaling_report(small: dict, large: dict) -> str:
    lines = [f"neighbour stage, {small['n']} -> {large['n']} bench abstracts (paperlake's vectors)"]
    names = {
        "exact": "paperlake exact (auto below 20,000)",
        "hnsw": "paperlake HNSW (auto above 20,000)",
        "baseline": "baseline SQL self-join",
    }
    for key, label in names.items():
        if f"{key}_seconds" not in small:
            continue
        a, b = small[f"{key}_seconds"], large[f"{key}_seconds"]
        lines.append(f"  {label:<38} {a:8.3f} s -> {b:8.3f} s  ({b / a:5.1f}x)")
    lines.append(
        f"  HNSW recall@10 against exact: {small['hnsw_recall_at_10']:.4f} at {small['n']}, "
        f"{large['hnsw_recall_at_10']:.4f} at {large['n']}"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="abstracts in the corpus")
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--sample", type=int, default=1000, help="papers in the fp32 check")
    parser.add_argument("--scaling", action="store_true", help="neighbour stage at N and 10 N")
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument(
        "--precision", default="auto", help="paperlake's encoder (as `paperlake run --precision`)"
    )
    parser.add_argument(
        "--pairs", type=int, default=1, help="baseline and cold runs, alternated; medians"
    )
    args = parser.parse_args()

    if args.scaling:
        vectors = bench_vectors(10 * args.n)
        with_baseline = not args.skip_baseline
        rows = [neighbour_scaling(n, vectors, with_baseline) for n in (args.n, 10 * args.n)]
        print(json.dumps(rows, indent=2))
        print(scaling_report(*rows))
        return

    work = args.work or Path(tempfile.mkdtemp(prefix="paperlake-bench-"))
    raw, warehouse = work / "raw", work / "warehouse"
    write_dump(raw / "dump.txt", abstracts(args.n))
    env = {**os.environ}
    env.pop("PREFECT_API_URL", None)  # every run starts its own temporary server, as a user's
    results: dict = {"n": args.n, "work": str(work), "precision": args.precision}
    # Both sides import the same large packages; load them once so that neither pays for
    # a cold page cache that the other then finds warm.
    timed([sys.executable, "-c", WARM_IMPORTS])
    run = [str(PAPERLAKE), "run", "--raw", str(raw), "--warehouse", str(warehouse)]
    run += ["--precision", args.precision]

    # Baseline and cold runs alternate, so that a slow spell of a shared machine falls on
    # both sides; with several pairs the medians are reported.
    bases, colds = [], []
    for _ in range(args.pairs):
        if not args.skip_baseline:
            base = timed(
                [sys.executable, str(ROOT / "bench" / "baseline.py"), str(raw / "dump.txt"),
                 "--out", str(work / "baseline")],
            )  # fmt: skip
            bases.append(
                {
                    "seconds": base["seconds"],
                    "peak_rss_mb": base["peak_rss_mb"],
                    "stages": json.loads(base["output"].strip().splitlines()[-1]),
                }
            )
        shutil.rmtree(warehouse, ignore_errors=True)
        colds.append(timed(run, env=env))
    if bases:
        results["baseline"] = median_run(bases)
        results["pairs"] = [
            round(b["seconds"] / c["seconds"], 3) for b, c in zip(bases, colds, strict=True)
        ]
    cold = median_run(colds)
    warm = timed(run, env=env)
    new = max(1, args.n // 100)
    write_dump(raw / "new.txt", abstracts(new, offset=args.n))
    incremental = timed(run, env=env)
    for name, res in (("cold", cold), ("warm", warm), ("incremental", incremental)):
        results[name] = {
            "seconds": res["seconds"],
            "peak_rss_mb": res["peak_rss_mb"],
            "embedded": embedded_count(res["output"]),
            "stages": stage_seconds(res["output"]),
        }
    results["agreement"] = agreement(warehouse, args.sample)
    report(results, new)
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / f"results-{args.n}.json").write_text(json.dumps(results, indent=2))


def median_run(runs: list[dict]) -> dict:
    """The run of median wall seconds (the lower middle one of an even count)."""
    return sorted(runs, key=lambda r: r["seconds"])[(len(runs) - 1) // 2]


def report(r: dict, new: int) -> None:
    cold, warm, inc = r["cold"], r["warm"], r["incremental"]
    lines = [
        f"paperlake bench, N = {r['n']} abstracts, precision {r.get('precision', 'auto')} "
        f"(work folder {r['work']})",
        "",
    ]
    if "baseline" in r:
        b = r["baseline"]
        lines.append(
            f"baseline     {b['seconds']:7.1f} s  peak {b['peak_rss_mb']:6.0f} MB  "
            f"(embed {b['stages']['embed']:.1f} s = {r['n'] / b['stages']['embed']:.1f}/s, "
            f"kNN {b['stages']['knn']:.1f} s)"
        )
    for name, res in (("cold", cold), ("warm", warm), ("incremental", inc)):
        stages = "  ".join(f"{k} {v:.1f}" for k, v in res["stages"].items())
        lines.append(
            f"{name:<12} {res['seconds']:7.1f} s  peak {res['peak_rss_mb']:6.0f} MB  "
            f"embedded {res['embedded']}  [{stages}]"
        )
    embed = cold["stages"].get("embed")
    if embed:
        lines.append(f"embedding throughput (cold): {cold['embedded'] / embed:.1f} abstracts/s")
    others = sum(v for k, v in cold["stages"].items() if k not in ("embed", "startup"))
    lines.append(f"ingest + validate + derive + publish: {others / cold['seconds']:.1%} of cold")
    lines.append("")
    if "baseline" in r:
        ratio = r["baseline"]["seconds"] / cold["seconds"]
        pairs = r.get("pairs", [])
        each = f"  (medians; pair by pair: {', '.join(f'{x:.2f}' for x in pairs)})"
        lines.append(f"baseline / cold     = {ratio:.2f}" + (each if len(pairs) > 1 else ""))
    lines.append(f"warm / cold         = {warm['seconds'] / cold['seconds']:.3f}")
    lines.append(
        f"incremental / cold  = {inc['seconds'] / cold['seconds']:.3f}  (+{new} abstracts)"
    )
    a = r["agreement"]
    lines.append(
        f"agreement with fp32 on {a['sample']} papers: mean cosine {a['mean_cosine']:.5f}, "
        f"min {a['min_cosine']:.5f}, top-10 neighbour overlap {a['top10_overlap']:.3f}"
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
