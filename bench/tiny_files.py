"""Ingest of many tiny files, before and after, side by side.

Writes a raw folder of N files (20,000 by default) of one abstract each, then reads it
with flows.ingest.ingest() as `paperlake run` does (a fresh parse cache, so every file is
parsed) in child processes: one on the code of a git revision (`--before`, default main),
one on this checkout. Prints, for each, the wall seconds of the ingest, the child's peak
resident memory (os.wait4) and what it read, then the ratios; with `--rounds` above 1,
the two alternate and the medians are compared.

    .venv/bin/python bench/tiny_files.py                       # 20,000 files
    .venv/bin/python bench/tiny_files.py --files 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from child import child_figures

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "raw"
CHILD = """
import json, sys, time
from pathlib import Path
from flows import ingest
raw, cache = Path(sys.argv[1]), Path(sys.argv[2])
start = time.perf_counter()
result = ingest.ingest([raw], cache_dir=cache)
records = result.records.height
seconds = time.perf_counter() - start
sources = result.sources
print(json.dumps({
    "seconds": seconds, "files": sources.height, "records": records,
    "accepted": int(sources["accepted"].sum()), "rejected": int(sources["rejected"].sum()),
}))
"""


def sample_abstracts() -> list[str]:
    out = []
    for path in sorted(SAMPLE.glob("*.txt")):
        blocks = path.read_text(encoding="utf-8").split("\n\n")[1:]
        out.extend(" ".join(b.split()) for b in blocks if b.strip())
    return out


def write_files(folder: Path, n: int) -> None:
    """n files of one abstract each, a hundred to a folder, under a folder naming a venue."""
    abstracts = sample_abstracts()
    for i in range(n):
        path = folder / "iclr_2026" / f"part{i // 100:03d}" / f"paper{i:05d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{abstracts[i % len(abstracts)]} This is paper {i}.\n", encoding="utf-8")


def code_at(revision: str, target: Path) -> Path:
    """The flows/ and sql/ folders of a git revision, unpacked into `target`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "flows", "sql"],
        check=True,
        capture_output=True,
    ).stdout
    target.mkdir(parents=True)
    with tempfile.TemporaryFile() as tmp:
        tmp.write(archive)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(target, filter="data")
    return target


def measure(tree: Path, raw: Path, cache: Path) -> dict:
    """One ingest of `raw` by the code in `tree`, in a child: its figures and peak RSS."""
    return child_figures(
        [sys.executable, "-c", CHILD, str(raw), str(cache)],
        f"{tree}: the ingest child",
        cwd=tree,
        env=dict(os.environ, PYTHONPATH=str(tree)),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--before", default="main", help="git revision of the code before")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="paperlake-tiny-") as tmp:
        work = Path(tmp)
        raw = work / "raw"
        write_files(raw, args.files)
        trees = {"before": code_at(args.before, work / "before"), "after": ROOT}
        runs: dict[str, list[dict]] = {"before": [], "after": []}
        for round_no in range(args.rounds):
            for name, tree in trees.items():
                cache = work / f"cache-{name}-{round_no}"
                figures = measure(tree, raw, cache)
                runs[name].append(figures)
                print(json.dumps({"round": round_no + 1, "code": name, **figures}), flush=True)
        medians = {
            name: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "peak_rss_mb")}
            for name, rs in runs.items()
        }
        print(
            json.dumps(
                {
                    "files": args.files,
                    "before": args.before,
                    "medians": medians,
                    "seconds_ratio": medians["before"]["seconds"] / medians["after"]["seconds"],
                    "rss_ratio": medians["before"]["peak_rss_mb"] / medians["after"]["peak_rss_mb"],
                }
            )
        )


if __name__ == "__main__":
    main()
