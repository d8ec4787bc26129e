"""`make bench-projection`: per-stage throughput measured here, and the wall time it implies
for all 2.7 million arXiv abstracts with the real model.

Measured, in one run of this script:
- the real model's embedding rate on real abstracts: a cold `paperlake run` on
  ../shared/corpora (or `--real FOLDER`), its embed stage's seconds over the papers it
  embedded;
- every other stage at scale: cold runs of `bench/incremental.py --cheap-embedder` at two
  sizes (default 10,000 and 100,000; `--cheap JSON` reads an earlier run's
  bench/out/incremental-cheap.json instead). Each stage's growth exponent k comes from the
  two sizes (seconds grow as n^k, k at least 1), and carries the larger size to 2.7 million;
- a GPU's rate where `--gpu JSON` gives bench/gpu_check.sh's output; without one, the
  issue's goal (20,000 abstracts/s) stands in that column, marked as a goal.

The machines: this one (its cores as `os.cpu_count()`), one of 16 cores, 8 Dask workers of
16 cores, one GPU beside 16 cores. Ingest and embed are spread over cores and workers
(chunked reads, one encode shard a worker), so they scale by cores; derive, validate and
publish run on one process and are held at this machine's figure in every column (DuckDB
threads them, but no run here measured them on more cores). Printed as a table and written
to bench/out/projection.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import PAPERLAKE, ROOT, embedded_count, stage_seconds, timed  # noqa: E402

ARXIV = 2_710_783
GPU_GOAL = 20_000.0
SCALED = ("ingest", "embed")
HELD = ("derive", "validate", "publish")
CORPORA = ROOT.parent / "shared" / "corpora"


def real_embed_rate(raw: Path, work: Path) -> dict:
    """Abstracts a second of the real model on this machine: one cold run on `raw`."""
    shutil.rmtree(work / "real", ignore_errors=True)  # a cold run, also in a reused --work
    cmd = [str(PAPERLAKE), "run", "--raw", str(raw), "--warehouse", str(work / "real")]
    res = timed(cmd, env={**os.environ, "PYTHONPATH": str(ROOT)})
    embedded, seconds = embedded_count(res["output"]), stage_seconds(res["output"])["embed"]
    return {"papers": embedded, "embed_s": seconds, "per_s": embedded / seconds}


def cheap_rows(path: Path | None, sizes: list[int], work: Path) -> list[dict]:
    """Cold runs of the cheap-embedder bench at two sizes (run now unless `path` is given)."""
    if path is None:
        bench = [sys.executable, str(ROOT / "bench" / "incremental.py"), "--cheap-embedder"]
        bench += ["--sizes", *map(str, sizes), "--repeats", "1", "--work", str(work / "cheap")]
        subprocess.run(bench, check=True)
        path = ROOT / "bench" / "out" / "incremental-cheap.json"
    saved = json.loads(path.read_text())
    rows = saved["rows"] if isinstance(saved, dict) else saved  # WORK/incremental.json too
    return sorted(rows, key=lambda r: r["n"])[-2:]


def stage_model(rows: list[dict]) -> dict[str, dict]:
    """Each stage's seconds at the larger size and its growth exponent between the two."""
    small, large = rows
    out = {}
    for stage in ("ingest", *HELD):
        a, b = small["cold"]["stages"].get(stage, 0.0), large["cold"]["stages"][stage]
        k = math.log(b / a) / math.log(large["n"] / small["n"]) if a > 0 else 1.0
        out[stage] = {"n": large["n"], "seconds": b, "k": round(max(1.0, k), 2)}
    return out


def projection(stages: dict, embed_per_s: float, gpu_per_s: float, cores: int) -> dict:
    """Hours a stage for ARXIV abstracts on each machine."""
    here = {s: m["seconds"] * (ARXIV / m["n"]) ** m["k"] for s, m in stages.items()}
    here["embed"] = ARXIV / embed_per_s
    machines = {"this machine": cores, "16 cores": 16, "8 workers x 16 cores": 128}
    table = {}
    for name, machine_cores in machines.items():
        speed = machine_cores / cores
        table[name] = {s: here[s] / (speed if s in SCALED else 1.0) for s in here}
    gpu = dict(table["16 cores"])
    gpu["embed"] = ARXIV / gpu_per_s
    table["one GPU + 16 cores"] = gpu
    return {m: {s: round(v / 3600, 2) for s, v in t.items()} for m, t in table.items()}


def render(facts: dict) -> str:
    stages, cores = facts["stages"], facts["cores"]
    lines = [f"measured on {cores} cores; stage: throughput here, per core, growth exponent"]
    embed = facts["embed"]
    lines.append(
        f"  embed (real model, {embed['papers']} real abstracts): {embed['per_s']:.1f}/s, "
        f"{embed['per_s'] / cores:.1f}/s a core"
    )
    for stage, m in stages.items():
        rate = m["n"] / m["seconds"]
        lines.append(
            f"  {stage} (cheap embedder, cold at {m['n']:,}): {rate:,.0f}/s, "
            f"{rate / cores:,.0f}/s a core, k={m['k']}"
        )
    lines.append(f"  GPU: {facts['gpu_per_s']:,.0f}/s ({facts['gpu_source']})")
    heads = ["ingest", "embed", *HELD]
    lines.append(f"\nhours for {ARXIV:,} abstracts, real model")
    lines.append(f"{'':<22}" + "".join(f"{h:>10}" for h in [*heads, "total"]))
    for machine, hours in facts["hours"].items():
        cells = [hours[h] for h in heads] + [sum(hours.values())]
        lines.append(f"{machine:<22}" + "".join(f"{c:>10.2f}" for c in cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--real", type=Path, default=CORPORA, help="real abstracts to embed")
    parser.add_argument("--cheap", type=Path, help="an earlier incremental-cheap.json")
    parser.add_argument("--sizes", type=int, nargs=2, default=[10_000, 100_000])
    parser.add_argument("--gpu", type=Path, help="bench/gpu_check.sh's JSON")
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="paperlake-bench-projection-"))
    cores = os.cpu_count() or 1
    embed = real_embed_rate(args.real, work)
    stages = stage_model(cheap_rows(args.cheap, args.sizes, work))
    gpu_per_s, gpu_source = GPU_GOAL, "the goal, not measured"
    if args.gpu:
        gpu_per_s = json.loads(args.gpu.read_text())["pipeline"]["abstracts_per_s"]
        gpu_source = f"measured, {args.gpu}"
    facts = {"cores": cores, "embed": embed, "stages": stages, "gpu_per_s": gpu_per_s,
             "gpu_source": gpu_source}  # fmt: skip
    facts["hours"] = projection(stages, embed["per_s"], gpu_per_s, cores)
    print(render(facts))
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "projection.json").write_text(json.dumps(facts, indent=2))


if __name__ == "__main__":
    main()
