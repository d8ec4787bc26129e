"""`make bench-cluster`: one corpus in one process and on Dask LocalClusters, side by side.

Each configuration is a cold `paperlake run` (fresh warehouse, empty caches) on the same
generated corpus, run as its own process, in turn: in-process, then --cluster local:1,
local:2, ... Reported: the embedding stage's throughput and the whole run's wall time;
the checksum of each version, which must be the same everywhere; and a projection for
the full arXiv snapshot from the measured per-worker throughput and the fixed cost.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import abstracts, write_dump  # noqa: E402
from run import PAPERLAKE, ROOT, WARM_IMPORTS, stage_seconds, timed  # noqa: E402

ARXIV = 2_500_000  # abstracts in the arXiv metadata snapshot


def version_checksum(warehouse: Path) -> str:
    out = subprocess.run(
        [str(PAPERLAKE), "checksum", "-w", str(warehouse), "--format", "json"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return next(r["checksum"] for r in json.loads(out) if r["table"] == "(version)")


def measure(raw: Path, work: Path, name: str, cluster: str | None, env: dict) -> dict:
    warehouse = work / f"warehouse-{name}"
    shutil.rmtree(warehouse, ignore_errors=True)
    cmd = [str(PAPERLAKE), "run", "--raw", str(raw), "--warehouse", str(warehouse)]
    result = timed(cmd + (["--cluster", cluster] if cluster else []), env=env)
    stages = stage_seconds(result["output"])
    computed = int(re.search(r"embeddings computed: (\d+)", result["output"]).group(1))
    return {
        "config": name,
        "seconds": round(result["seconds"], 1),
        "stages": stages,
        "embedded": computed,
        "embed_per_s": round(computed / stages["embed"], 1),
        "checksum": version_checksum(warehouse),
    }


def projection(rows: list[dict], n: int) -> list[str]:
    """Hours for ARXIV abstracts on W workers like these, from the measured figures."""
    one = next(r for r in rows if r["config"] == "local:1")
    per_worker = one["embed_per_s"]
    fixed = one["seconds"] - one["stages"]["embed"]  # start-up, other stages at this n
    lines = [f"projection for {ARXIV:,} abstracts (embedding only, {per_worker}/s per worker):"]
    for workers in (1, 2, 8, 32, 128):
        hours = ARXIV / (per_worker * workers) / 3600
        lines.append(f"  {workers:>4} workers like these: {hours:7.1f} h (+ {fixed:.0f} s fixed)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="abstracts in the corpus")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="paperlake-bench-cluster-"))
    raw = work / "raw"
    write_dump(raw / "dump.txt", abstracts(args.n))
    env = {**os.environ}
    env.pop("PREFECT_API_URL", None)  # each run starts its own server, as a user's does
    env.pop("PAPERLAKE_THREADS", None)
    timed([sys.executable, "-c", WARM_IMPORTS])
    rows = [measure(raw, work, "in-process", None, env)]
    rows += [measure(raw, work, f"local:{w}", f"local:{w}", env) for w in args.workers]

    base = rows[0]
    print(f"paperlake bench-cluster, N = {args.n} abstracts, {os.cpu_count()} cores ({work})")
    print(f"{'config':<12}{'run s':>8}{'embed s':>9}{'embed/s':>9}{'x run':>7}  checksum")
    for r in rows:
        print(
            f"{r['config']:<12}{r['seconds']:>8}{r['stages']['embed']:>9}{r['embed_per_s']:>9}"
            f"{base['seconds'] / r['seconds']:>7.2f}  {r['checksum']}"
        )
    same = len({r["checksum"] for r in rows}) == 1
    print("checksums: " + ("all equal" if same else "DIFFER"))
    if any(r["config"] == "local:1" for r in rows):
        print("\n".join(projection(rows, args.n)))
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / f"cluster-{args.n}.json").write_text(json.dumps(rows, indent=2))
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
