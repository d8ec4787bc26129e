"""`make bench-incremental`: what a +1% run costs on warehouses of different sizes.

For each size N (default 1,000 and 10,000 generated abstracts): a cold run builds the
warehouse, then N/100 new abstracts arrive and a second run adds them; `--repeats R`
(default 3) such +1% runs, each adding a further 1%, go in turns across the sizes, so that
the sizes meet the same moments of a shared machine's load. Printed side by side: seconds
per stage of each cold run and of each size's median +1% run, and the ratios the
incremental design promises to keep low: +1% on the larger warehouse against +1% on the
smaller (work should follow what changed, not what the warehouse holds), round by round
and of the medians, and +1% against that warehouse's cold run. The CPU seconds of each
run's processes are printed beside the wall seconds, with their ratio of medians: what
the runs computed, beside how long they took (on a shared machine both move with other
work: 11.1-15.6 CPU s and 7.5-10.4 wall s for five alike +1% runs at 10,000).
Each run is its own `paperlake run` process with its own temporary Prefect server, as a
user's is (set PREFECT_API_URL to measure against a running server).

`--cheap-embedder` (`make bench-incremental-large`: 10,000 and 100,000) embeds with a tiny
random model built offline in the work folder (bench/cheap_model.py), passed as
`paperlake run --model FOLDER`: the pipeline runs unchanged, and everything but the model
is measured at scale. A smoke run on a few abstracts first checks the folder loads and
makes its encoder export, so no measured run pays for that. `--profile` adds a further 1%
to each warehouse under cProfile and prints the functions where that run spent its time
(`--profile-only`: on the warehouses an earlier run left in --work). The rows measured so
far are kept in WORK/incremental.json after each size; `--report` prints them again.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cheap_model import build as build_cheap_model  # noqa: E402
from corpus import abstracts, write_dump  # noqa: E402
from run import (  # noqa: E402
    PAPERLAKE,
    ROOT,
    WARM_IMPORTS,
    embedded_count,
    stage_cpu,
    stage_peaks,
    stage_seconds,
    timed,
)  # noqa: E402

STAGES = ("startup", "ingest", "embed", "derive", "validate", "publish")
SMOKE_N = 50
# The goals (issue 15): +1% on 100,000 at most 1.5x +1% on 10,000; +100 on
# 10,000 (real model) at most 10% of that warehouse's cold run.
GOAL_GROWTH = 1.5
GOAL_PLUS_OVER_COLD = 0.10


def run_facts(res: dict) -> dict:
    """What a `paperlake run` printed: stage seconds, counts, the model and its backend."""
    output = res["output"]
    counts = re.search(r"near-duplicate pairs: (\d+)\s+topics: (\d+)", output)
    encoder = re.search(r"embed: .*\((\S+), (\S+)\) in ", output)
    return {
        "seconds": round(res["seconds"], 1),
        "cpu_seconds": round(res["cpu_seconds"], 1),
        "peak_rss_mb": round(res["peak_rss_mb"]),
        "embedded": embedded_count(output),
        "stages": stage_seconds(output),
        "stage_peaks_gb": stage_peaks(output),
        "stage_cpu": stage_cpu(output),
        "pairs": int(counts.group(1)) if counts else -1,
        "topics": int(counts.group(2)) if counts else -1,
        "encoder": f"{encoder.group(1)}, {encoder.group(2)}" if encoder else "?",
    }


def paperlake_run(raw: Path, warehouse: Path, model: Path | None) -> list[str]:
    cmd = [str(PAPERLAKE), "run", "--raw", str(raw), "--warehouse", str(warehouse)]
    return cmd + (["--model", str(model)] if model else [])


def measure_cold(n: int, work: Path, env: dict, model: Path | None) -> dict:
    """A cold run on N generated abstracts: the size's row, its +1% runs to come."""
    raw, warehouse = work / f"raw-{n}", work / f"warehouse-{n}"
    write_dump(raw / "dump.txt", abstracts(n))
    cold = run_facts(timed(paperlake_run(raw, warehouse, model), env=env))
    print(f"  {n:,}: cold {cold['seconds']} s", flush=True)
    return {"n": n, "cold": cold, "plus1_runs": []}


def measure_plus_one(row: dict, work: Path, env: dict, model: Path | None) -> None:
    """A further 1% of the size's abstracts arrives and a run adds it; `plus1` is the
    median of the size's +1% runs so far (by wall seconds)."""
    n = row["n"]
    raw, warehouse = work / f"raw-{n}", work / f"warehouse-{n}"
    step, done = max(1, n // 100), len(row["plus1_runs"])
    name = "new.txt" if done == 0 else f"new{done + 1}.txt"
    write_dump(raw / name, abstracts(step, offset=n + done * step))
    added = run_facts(timed(paperlake_run(raw, warehouse, model), env=env))
    row["plus1_runs"].append(added)
    ranked = sorted(row["plus1_runs"], key=lambda r: r["seconds"])
    row["plus1"] = ranked[(len(ranked) - 1) // 2]
    print(f"  {n:,}: +1% run {done + 1}: {added['seconds']} s", flush=True)


def profile(n: int, work: Path, env: dict, model: Path | None, top: int = 25) -> str:
    """A further 1% added to the warehouse of `n` under cProfile (bench/profile_run.py):
    where that run spent its time (functions by own time, with the callers of the top few;
    paperlake's functions by cumulative time; each SQL table of the aggregate stage)."""
    raw, warehouse = work / f"raw-{n}", work / f"warehouse-{n}"
    step = max(1, n // 100)
    added = len(list(raw.glob("new*.txt")))  # each profile adds a further 1%
    write_dump(raw / f"new{added + 1}.txt", abstracts(step, offset=n + added * step))
    stats = work / f"plus1-{n}.prof"
    cmd = [sys.executable, str(ROOT / "bench" / "profile_run.py"), str(stats)]
    facts = run_facts(timed(cmd + paperlake_run(raw, warehouse, model)[1:], env=env))
    sql = json.loads(stats.with_suffix(".sql.json").read_text())
    stages = "  ".join(f"{k} {v:.1f}" for k, v in facts["stages"].items())
    out = work / f"plus1-{n}.txt"
    with out.open("w") as handle:
        view = pstats.Stats(str(stats), stream=handle).sort_stats("tottime")
        view.print_stats(top)
        for func in view.fcn_list[:4]:
            view.print_callers(re.escape(pstats.func_std_string(func)), 6)
        view.sort_stats("cumulative").print_stats(r"/flows/", top)
    tables = "  ".join(f"{k} {v:.2f}" for k, v in sorted(sql.items(), key=lambda kv: -kv[1]))
    return (
        f"profile of a further +1% on {n:,}: {facts['seconds']} s wall under cProfile "
        f"[{stages}]\naggregate's SQL tables, seconds: {tables}\n" + out.read_text()
    )


def code_line(env: dict) -> str:
    """Which checkout the runs import `flows` from, and its commit (runs use PYTHONPATH)."""
    where = subprocess.run(
        [sys.executable, "-c", "import flows; print(flows.__file__)"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    return f"flows from {Path(where).parent} at commit {commit or '?'}" + (
        " (with uncommitted changes)" if dirty else ""
    )


def table(rows: list[dict], title: str) -> str:
    """Stages down, runs across: each size's cold and +1% side by side, and how each
    stage of a +1% run grew from the smallest warehouse to the largest."""
    small, large = rows[0], rows[-1]
    heads = [f"{r['n']:,} {label}" for r in rows for label in ("cold", "+1%")]
    short = lambda n: f"{n // 1000}k" if n % 1000 == 0 else str(n)  # noqa: E731
    growth = f"+1% {short(large['n'])}/{short(small['n'])}" if len(rows) > 1 else ""
    width = max(12, *(len(h) + 2 for h in heads))
    lines = [title, f"{'':<12}" + "".join(f"{h:>{width}}" for h in heads) + f"{growth:>16}"]

    def line(label: str, value, fmt: str = ".1f") -> str:
        cells = [value(r[k]) for r in rows for k in ("cold", "plus1")]
        text = f"{label:<12}" + "".join(f"{c:>{width}{fmt}}" for c in cells)
        a, b = value(small["plus1"]), value(large["plus1"])
        if growth and fmt == ".1f":
            text += f"{(b / a if a else float('nan')):>16.2f}"
        return text

    lines.append(line("wall s", lambda r: r["seconds"]))
    # CPU seconds of the run's processes (the Prefect server's included).
    lines.append(line("cpu s", lambda r: r.get("cpu_seconds", float("nan"))))
    for stage in STAGES:
        lines.append(line(stage, lambda r, s=stage: r["stages"].get(s, 0.0)))
    # Process start, imports and the flow's own bookkeeping: what no stage timer covers.
    lines.append(line("other", lambda r: r["seconds"] - sum(r["stages"].values())))
    lines.append(line("embedded", lambda r: r["embedded"], "d"))
    lines.append(line("dup pairs", lambda r: r["pairs"], "d"))
    lines.append(line("topics", lambda r: r["topics"], "d"))
    lines.append(line("peak MB", lambda r: r["peak_rss_mb"], "d"))
    # The `paperlake run` process's peak so far as each stage ended (the Prefect server's
    # process is apart; runs measured before the line was printed have none).
    for stage in STAGES:
        get = lambda r, s=stage: r.get("stage_peaks_gb", {}).get(s, float("nan"))  # noqa: E731
        lines.append(line(f"GB {stage}", get, ".2f"))
    return "\n".join(lines)


def median_cpu(row: dict) -> float:
    """The median CPU seconds of a size's +1% runs (nan where none were kept)."""
    cpu = sorted(r.get("cpu_seconds", float("nan")) for r in row.get("plus1_runs", []))
    return cpu[(len(cpu) - 1) // 2] if cpu else float("nan")


def ratios(rows: list[dict], cheap: bool) -> str:
    small, large = rows[0], rows[-1]
    lines = []
    if len(rows) > 1:
        growth = large["plus1"]["seconds"] / small["plus1"]["seconds"]
        rounds = [
            b["seconds"] / a["seconds"]
            for a, b in zip(small.get("plus1_runs", []), large.get("plus1_runs", []), strict=False)
        ]
        lines.append(
            f"+1% on {large['n']:,} / +1% on {small['n']:,} = {growth:.2f} (medians)  "
            f"(goal <= {GOAL_GROWTH} from 10,000 to 100,000)"
        )
        if len(rounds) > 1:
            lines.append("  round by round: " + ", ".join(f"{r:.2f}" for r in rounds))
        cpu = [median_cpu(r) for r in (small, large)]
        if all(c == c for c in cpu):  # rows measured before CPU seconds were kept have none
            lines.append(
                f"CPU seconds, +1% on {large['n']:,} / +1% on {small['n']:,} = "
                f"{cpu[1] / cpu[0]:.2f} (medians: {cpu[0]:.1f} and {cpu[1]:.1f} s)"
            )
    for r in rows:
        share = r["plus1"]["seconds"] / r["cold"]["seconds"]
        goal = (
            f"  (goal <= {GOAL_PLUS_OVER_COLD:.2f}: +100 on 10,000, real model)"
            if r["n"] == 10_000 and not cheap
            else ""
        )
        lines.append(f"+1% / cold at {r['n']:,} = {share:.3f}{goal}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument(
        "--cheap-embedder",
        action="store_true",
        help="embed with a tiny random model (WORK/cheap-model) to measure the rest at scale",
    )
    parser.add_argument("--model", type=Path, help="a local sentence-transformers folder")
    parser.add_argument(
        "--repeats", type=int, default=3, help="+1%% runs per size, in turns across sizes"
    )
    parser.add_argument(
        "--profile", action="store_true", help="then a further +1%% on each size, under cProfile"
    )
    parser.add_argument(
        "--profile-only",
        action="store_true",
        help="only the profiles, on the warehouses a run before left in --work",
    )
    parser.add_argument(
        "--report", type=Path, help="print the table of a run's WORK/incremental.json, and stop"
    )
    args = parser.parse_args()
    if args.report:
        saved = json.loads(args.report.read_text())
        print(table(saved["rows"], saved["title"]))
        print(ratios(saved["rows"], cheap=saved["cheap"]))
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="paperlake-bench-incremental-"))
    work.mkdir(parents=True, exist_ok=True)
    # The runs import `flows` from this checkout (ahead of an editable install elsewhere),
    # so a clone benchmarks its own code.
    path = os.environ.get("PYTHONPATH")
    paths = [str(ROOT), *(p for p in (path or "").split(os.pathsep) if p and p != str(ROOT))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    model = args.model
    if args.cheap_embedder:
        model = build_cheap_model(work / "cheap-model")
    if not args.profile_only:
        measure_all(sorted(args.sizes), work, env, model, args.cheap_embedder, args.repeats)
    if args.profile or args.profile_only:
        for n in sorted(args.sizes):
            print(profile(n, work, env, model), flush=True)


def measure_all(
    sizes: list[int], work: Path, env: dict, model: Path | None, cheap: bool, repeats: int
) -> None:
    """A cold run at each size, then `repeats` rounds of a +1% run at each size, printed
    side by side; the rows so far are kept in WORK/incremental.json after each run
    (`--report` prints them), so a long run stopped part way keeps what it measured."""
    timed([sys.executable, "-c", WARM_IMPORTS])
    if model:
        # Checks that the folder works as `--model` and makes its encoder export now.
        smoke = run_facts(timed(paperlake_run(*smoke_dump(work), model), env=env))
        print(f"smoke run on {SMOKE_N} abstracts with {model}: {smoke['encoder']}", flush=True)
    rows = [measure_cold(n, work, env, model) for n in sizes]
    saved = {
        "title": f"paperlake bench-incremental ({work}); encoder {rows[0]['cold']['encoder']}"
        + (" (cheap embedder)" if cheap else "")
        + f", median of {repeats} +1% runs a size\n{code_line(env)}",
        "cheap": bool(model),
        "rows": rows,
    }
    for _ in range(repeats):
        for row in rows:
            measure_plus_one(row, work, env, model)
            (work / "incremental.json").write_text(json.dumps(saved, indent=2))
    print(table(rows, saved["title"]))
    print(ratios(rows, cheap=bool(model)))
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    name = "incremental-cheap.json" if cheap else "incremental.json"
    (out / name).write_text(json.dumps(rows, indent=2))


def smoke_dump(work: Path) -> tuple[Path, Path]:
    raw = work / "raw-smoke"
    write_dump(raw / "dump.txt", abstracts(SMOKE_N))
    return raw, work / "warehouse-smoke"


if __name__ == "__main__":
    main()
