"""`make bench-incremental`: what a +1% run costs on warehouses of different sizes.

For each size N (default 1,000 and 10,000 generated abstracts): a cold run builds the
warehouse, then N/100 new abstracts arrive and a second run adds them. Printed side by
side: seconds per stage of each run, and the ratios the incremental design promises to
keep low: +1% on the larger warehouse against +1% on the smaller (work should follow what
changed, not what the warehouse holds), and +1% against that warehouse's cold run.
Each run is its own `paperlake run` process with its own temporary Prefect server, as a
user's is (set PREFECT_API_URL to measure against a running server).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import abstracts, write_dump  # noqa: E402
from run import PAPERLAKE, ROOT, WARM_IMPORTS, embedded_count, stage_seconds, timed  # noqa: E402

STAGES = ("startup", "ingest", "embed", "aggregate", "validate", "publish")


def measure(n: int, work: Path, env: dict) -> dict:
    raw, warehouse = work / f"raw-{n}", work / f"warehouse-{n}"
    write_dump(raw / "dump.txt", abstracts(n))
    run = [str(PAPERLAKE), "run", "--raw", str(raw), "--warehouse", str(warehouse)]
    cold = timed(run, env=env)
    write_dump(raw / "new.txt", abstracts(max(1, n // 100), offset=n))
    added = timed(run, env=env)
    return {
        "n": n,
        **{
            name: {
                "seconds": round(res["seconds"], 1),
                "embedded": embedded_count(res["output"]),
                "stages": stage_seconds(res["output"]),
            }
            for name, res in (("cold", cold), ("plus1", added))
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="paperlake-bench-incremental-"))
    env = {**os.environ}
    timed([sys.executable, "-c", WARM_IMPORTS])
    rows = [measure(n, work, env) for n in args.sizes]

    print(f"paperlake bench-incremental ({work})")
    print(f"{'run':<16}{'wall s':>8}{'embedded':>10}" + "".join(f"{s:>11}" for s in STAGES))
    for r in rows:
        for name in ("cold", "plus1"):
            res = r[name]
            label = f"{r['n']:,} {'cold' if name == 'cold' else '+1%'}"
            cells = "".join(f"{res['stages'].get(s, 0):>11.1f}" for s in STAGES)
            print(f"{label:<16}{res['seconds']:>8}{res['embedded']:>10}{cells}")
    small, large = rows[0], rows[-1]
    print(
        f"+1% on {large['n']:,} / +1% on {small['n']:,} = "
        f"{large['plus1']['seconds'] / small['plus1']['seconds']:.2f}"
    )
    for r in rows:
        print(f"+1% / cold at {r['n']:,} = {r['plus1']['seconds'] / r['cold']['seconds']:.3f}")
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "incremental.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
