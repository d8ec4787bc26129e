"""`make bench-million`: a million generated abstracts, cold and +1% twice, beside the same
+1% runs on a warehouse of 100,000.

Each size's raw folder holds one arXiv metadata JSON Lines file (95% of its abstracts,
about 1.4 GB at a million) and a folder of small text dumps of 100 abstracts each (the
other 5%), all written as they are generated (bench/corpus.py). The embedder is the tiny
random model of bench/cheap_model.py, so every stage but the model is measured at scale.
A cold run builds each warehouse; then, in turns across the sizes, a further 1% arrives
as a new JSON Lines file and a run adds it, twice. Every run is its own `paperlake run`
process, and its summary gives each stage's wall seconds, CPU seconds and the process's
peak memory as the stage ended.

Printed: a table of stages down and runs across, and the ratio the issue asks for (the
median +1% wall at a million over the same at 100,000); written as JSON to
bench/out/million.json (and WORK/million.json after every run, so a stopped bench keeps
what it measured). Its last line reads `million: cold_s=... cold_peak_gb=... inc_s=...
inc_peak_gb=... inc_ratio=...`. A run that would take the machine's memory (less than
MIN_FREE_GB left) is stopped and reported as such, not left to the kernel.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cheap_model import build as build_cheap_model  # noqa: E402
from corpus import stream, write_dump, write_jsonl  # noqa: E402
from incremental import STAGES, code_line, paperlake_run, run_facts, smoke_dump  # noqa: E402
from run import ROOT, WARM_IMPORTS, timed  # noqa: E402

SMALL_SHARE = 0.05  # of a size's abstracts, in small text dumps
SMALL_FILE = 100  # abstracts a small dump
MIN_FREE_GB = 1.5  # a run is stopped when the machine has less memory than this left
ROUNDS = 2


def write_raw(n: int, raw: Path) -> None:
    """N abstracts: the first 95% as one arXiv JSON Lines file, the rest as small dumps."""
    texts = stream()
    big = n - round(n * SMALL_SHARE)
    write_jsonl(raw / "arxiv.jsonl", itertools.islice(texts, big), first=1)
    for start in range(big, n, SMALL_FILE):
        chunk = list(itertools.islice(texts, min(SMALL_FILE, n - start)))
        write_dump(raw / "small" / f"dump-{start // SMALL_FILE:05d}.txt", chunk)


def write_more(n: int, raw: Path, round_no: int) -> None:
    """Round `round_no`'s 1% of N new abstracts, as a new JSON Lines file."""
    step = n // 100
    skip = n + (round_no - 1) * step
    texts = itertools.islice(stream(), skip, skip + step)
    write_jsonl(raw / f"new-{round_no}.jsonl", texts, first=skip + 1)


def watched(cmd: list[str], env: dict) -> dict:
    """Run a command as `timed` does, in its own process group, stopped where the machine
    runs short of memory."""
    return timed(cmd, watch=short_of_memory, env=env, start_new_session=True)


def short_of_memory(proc: subprocess.Popen) -> str | None:
    """Stop `proc`'s process group once less than MIN_FREE_GB is left, and say so."""
    while proc.poll() is None:
        if (free := available_gb()) < MIN_FREE_GB:
            os.killpg(proc.pid, signal.SIGKILL)
            return f"stopped with {free:.1f} GB of memory left"
        time.sleep(0.5)
    return None


def available_gb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024**2
    return float("inf")


def measured(n: int, label: str, work: Path, env: dict, model: Path) -> dict:
    raw, warehouse = work / f"raw-{n}", work / f"warehouse-{n}"
    facts = run_facts(watched(paperlake_run(raw, warehouse, model), env))
    print(
        f"  {n:,} {label}: {facts['seconds']} s, peak {facts['peak_rss_mb'] / 1024:.2f} GB",
        flush=True,
    )
    return facts


def table(rows: dict[str, dict]) -> str:
    """Stages down; each run across: wall s / CPU s / peak GB as the stage ended."""
    heads = list(rows)
    width = max(26, *(len(h) + 2 for h in heads))
    lines = [f"{'wall s / cpu s / GB':<20}" + "".join(f"{h:>{width}}" for h in heads)]
    for stage in STAGES:
        cells = []
        for facts in rows.values():
            wall, cpu = facts["stages"].get(stage), facts.get("stage_cpu", {}).get(stage)
            peak = facts["stage_peaks_gb"].get(stage)
            cells.append(" / ".join("-" if v is None else f"{v:.1f}" for v in (wall, cpu))
                         + (f" / {peak:.2f}" if peak is not None else " / -"))  # fmt: skip
        lines.append(f"{stage:<20}" + "".join(f"{c:>{width}}" for c in cells))
    whole = [
        f"{f['seconds']:.1f} / {f['cpu_seconds']:.1f} / {f['peak_rss_mb'] / 1024:.2f}"
        for f in rows.values()
    ]
    lines.append(f"{'run (all processes)':<20}" + "".join(f"{c:>{width}}" for c in whole))
    return "\n".join(lines)


def median(values: list[float]) -> float:
    ranked = sorted(values)
    return ranked[(len(ranked) - 1) // 2]


def summary_line(rows: dict[str, dict], large: int, small: int) -> str:
    cold = rows[f"{large:,} cold"]
    plus = [rows[k] for k in rows if k.startswith(f"{large:,} +1%")]
    base = [rows[k] for k in rows if k.startswith(f"{small:,} +1%")]
    inc = median([r["seconds"] for r in plus])
    ratio = inc / median([r["seconds"] for r in base])
    return (
        f"million: cold_s={cold['seconds']:.0f} cold_peak_gb={cold['peak_rss_mb'] / 1024:.2f} "
        f"inc_s={inc:.1f} inc_peak_gb={max(r['peak_rss_mb'] for r in plus) / 1024:.2f} "
        f"inc_ratio={ratio:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--beside", type=int, default=100_000, help="the smaller warehouse")
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--report", type=Path, help="print the table of a million.json, and stop")
    args = parser.parse_args()
    if args.report:
        saved = json.loads(args.report.read_text())
        print(saved["title"], table(saved["rows"]), saved.get("summary", ""), sep="\n")
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="paperlake-bench-million-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    model = build_cheap_model(work / "cheap-model")
    watched([sys.executable, "-c", WARM_IMPORTS], env)
    watched(paperlake_run(*smoke_dump(work), model), env)  # the encoder export, made once
    sizes = (args.beside, args.n)
    rows: dict[str, dict] = {}
    saved = {"title": f"paperlake bench-million ({work})\n{code_line(env)}", "rows": rows}

    def keep(label: str, facts: dict) -> None:
        rows[label] = facts
        (work / "million.json").write_text(json.dumps(saved, indent=2))

    for n in sizes:
        started = time.perf_counter()
        write_raw(n, work / f"raw-{n}")
        print(f"  {n:,}: raw files written in {time.perf_counter() - started:.0f} s", flush=True)
        keep(f"{n:,} cold", measured(n, "cold", work, env, model))
    for round_no in range(1, ROUNDS + 1):
        for n in sizes:
            write_more(n, work / f"raw-{n}", round_no)
            keep(f"{n:,} +1% #{round_no}", measured(n, f"+1% #{round_no}", work, env, model))
    print(saved["title"])
    print(table(rows))
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    line = summary_line(rows, args.n, args.beside)
    (out / "million.json").write_text(json.dumps({**saved, "summary": line}, indent=2))
    print(line)


if __name__ == "__main__":
    main()
