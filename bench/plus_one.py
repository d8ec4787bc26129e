"""`make bench-plus-one`: one new abstract on the sample warehouse, against `paperlake versions`.

A cold run builds a warehouse from data/raw in a work folder. Then, side by side in this
one run, each round adds one abstract (a new file) and times:
- `paperlake run` in a fresh process with no Prefect server running (it starts its own);
- `paperlake run` while `paperlake serve` serves the warehouse (the run is handed to the
  serving process, flows/serve/warm_runner.py);
- `paperlake versions`, the yardstick of a command that only opens the warehouse.
The medians, the ratios to `versions` and the stage seconds the runs printed follow.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import SAMPLE, abstracts, write_dump  # noqa: E402
from run import PAPERLAKE, ROOT, stage_seconds, timed  # noqa: E402

GOAL = 3.0  # issue 15: +1 abstract with a server running, at most 3x `paperlake versions`
SERVE_START_TIMEOUT = 300


def add_abstract(raw: Path, number: int) -> None:
    write_dump(raw / f"new-{number:03d}.txt", abstracts(1, seed=1000 + number), "ICLR 2026 Papers")


def start_serve(raw: Path, warehouse: Path, env: dict) -> subprocess.Popen:
    """`paperlake serve` on the warehouse, once its warm runner has written its address."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    runner = warehouse / "prefect" / "runner.json"
    log = (warehouse.parent / "serve.log").open("w")
    proc = subprocess.Popen(
        [str(PAPERLAKE), "serve", "--raw", str(raw), "--warehouse", str(warehouse),
         "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + SERVE_START_TIMEOUT
    while not runner.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"paperlake serve did not start: see {log.name}")
        time.sleep(0.2)
    return proc


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the serve's process group (it stops its server), then wait."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="paperlake-bench-plus-one-"))
    raw, warehouse = work / "raw", work / "warehouse"
    shutil.copytree(SAMPLE, raw)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PREFECT_API_URL", None)
    run = [str(PAPERLAKE), "run", "--raw", str(raw), "--warehouse", str(warehouse)]
    versions = [str(PAPERLAKE), "versions", "--warehouse", str(warehouse)]
    cold = timed(run, env=env)
    print(f"cold run on the sample: {cold['seconds']:.1f} s", flush=True)
    rows: dict[str, list[dict]] = {"fresh process": [], "serve running": [], "versions": []}
    number = 0
    for _ in range(args.rounds):
        number += 1
        add_abstract(raw, number)
        rows["fresh process"].append(timed(run, env=env))
        rows["versions"].append(timed(versions, env=env))
    serve = start_serve(raw, warehouse, env)
    try:
        for _ in range(args.rounds):
            number += 1
            add_abstract(raw, number)
            result = timed(run, env=env)
            if "handed to paperlake serve" not in result["output"]:
                raise RuntimeError(f"the run was not handed over:\n{result['output'][-2000:]}")
            rows["serve running"].append(result)
            print(f"handed to serve, round {len(rows['serve running'])}: "
                  f"{result['seconds']:.2f} s", flush=True)  # fmt: skip
            rows["versions"].append(timed(versions, env=env))
    finally:
        stop(serve)
    yardstick = statistics.median(r["seconds"] for r in rows["versions"])
    print(f"\n+1 abstract on the sample warehouse ({work}), median of {args.rounds} rounds")
    print(f"{'command':<28}{'seconds':>9}{'x versions':>12}  stages (last round)")
    summary = {}
    for label, runs in rows.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        stages = stage_seconds(runs[-1]["output"])
        line = "  ".join(f"{k} {v:.2f}" for k, v in stages.items())
        print(f"{label:<28}{seconds:>9.2f}{seconds / yardstick:>12.2f}  {line}")
        summary[label] = {"seconds": seconds, "ratio": seconds / yardstick, "stages": stages}
    ratio = summary["serve running"]["ratio"]
    print(f"serve running / versions = {ratio:.2f} (goal at most {GOAL:.0f})")
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "plus_one.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
