"""Wall time of one `paperlake search` process against one `paperlake versions` process.

Each repetition starts both commands afresh, alternating, on the same warehouse (the
sample one by default, made here on first use). Prints medians and their ratio; the goal
is a search costing at most 2x a versions call. `--explorer` times the searches with a
`paperlake explore` of the warehouse running, which the search hands its query to (the
fast path, docs/search-and-explorer.md), and the same searches without it, side by side.

    python bench/search_latency.py [--warehouse DIR] [--repeat N] [--query TEXT] [--explorer]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from explorer_process import explorer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PAPERLAKE = Path(sys.executable).with_name("paperlake")


def wall(args: list[str]) -> float:
    """Seconds one paperlake process takes, start to exit (its output discarded)."""
    start = time.perf_counter()
    subprocess.run([str(PAPERLAKE), *args], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--warehouse", type=Path, default=Path("/tmp/paperlake-latency-wh"))
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--query", default="speculative decoding")
    parser.add_argument("--explorer", action="store_true", help="also with an explorer running")
    args = parser.parse_args()
    wh = str(args.warehouse)
    if not (args.warehouse / "catalog.ducklake").exists():
        print(f"building the sample warehouse in {wh} ...", flush=True)
        subprocess.run(
            [str(PAPERLAKE), "run", "--raw", str(ROOT / "data" / "raw"), "--warehouse", wh],
            check=True,
            stdout=subprocess.DEVNULL,
            cwd=ROOT,
        )
    commands = {
        "versions": ["versions", "--warehouse", wh],
        "search": ["search", args.query, "--warehouse", wh],
        "search --mode keyword": ["search", args.query, "--mode", "keyword", "--warehouse", wh],
    }
    for argv in commands.values():  # first use: the keyword index, disk caches
        wall(argv)
    times = timed(commands, args.repeat)
    if args.explorer:
        with explorer(wh):
            for argv in commands.values():  # the explorer reads the version on first use
                wall(argv)
            handed = timed(commands, args.repeat)
        times |= {f"{name} (explorer)": t for name, t in handed.items() if name != "versions"}
        times["versions"] += handed["versions"]
    base = statistics.median(times["versions"])
    print(f"{args.repeat} runs each, wall seconds (median, min-max), on {wh}")
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"  paperlake {name:<33} {median:6.2f}  ({min(values):.2f}-{max(values):.2f})"
            f"  {median / base:4.2f}x versions"
        )


def timed(commands: dict[str, list[str]], repeat: int) -> dict[str, list[float]]:
    """Each command's wall seconds, `repeat` times, the commands in turns."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, argv in commands.items():
            times[name].append(wall(argv))
    return times


if __name__ == "__main__":
    main()
