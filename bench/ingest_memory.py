"""Peak memory of ingest on a large generated JSON Lines file.

Generates a JSON Lines file of synthetic abstracts (about 500 MB by default) in a
temporary folder, ingests it with flows.ingest.ingest() in a child process and prints
the child's peak resident memory (from os.wait4) and its throughput. Ingest streams the
file in batches and spills accepted records to Parquet parts, so the peak should stay
far below the file's size.

    .venv/bin/python bench/ingest_memory.py              # 500 MB, limit 1.5 GB
    .venv/bin/python bench/ingest_memory.py --mb 50      # a quick run
    .venv/bin/python bench/ingest_memory.py --long-line 1024 --limit-mb 500
        # a .gz holding one 1 GB line, then one good abstract: the line is rejected as
        # too_long after a few MB of it are held, whatever its length
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from child import child_figures

ROOT = Path(__file__).resolve().parent.parent
LIMIT_MB = 1536

# Vocabulary of the synthetic abstracts.
VOCABULARY = """
model training data learning neural network graph attention transformer language diffusion
retrieval benchmark robust sparse optimal policy reward agent vision token embedding
contrastive generative latent inference gradient variance convergence bound sample efficient
scalable adaptive hierarchical causal federated privacy fairness reasoning planning memory
context decoding alignment evaluation dataset protein molecule physics simulation control
uncertainty calibration kernel manifold spectral
"""
WORDS = VOCABULARY.split()


def sentence(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(12, 24))
    return " ".join(words).capitalize() + "."


def generate(path: Path, megabytes: int, seed: int = 0) -> int:
    """Write about `megabytes` MB of JSON Lines abstracts; returns the number of records."""
    rng = random.Random(seed)
    pool = [sentence(rng) for _ in range(20_000)]
    target = megabytes << 20
    written = records = 0
    with path.open("w", encoding="utf-8") as out:
        while written < target:
            records += 1
            abstract = " ".join(rng.sample(pool, rng.randint(6, 10)))
            line = json.dumps(
                {
                    "id": f"bench-{records:08d}",
                    "title": f"On {rng.choice(WORDS)} {rng.choice(WORDS)} number {records}",
                    "abstract": abstract,
                    "authors": ["A. Author", "B. Author"],
                    "keywords": "bench, synthetic",
                    "venue": "BENCH",
                    "year": 2026,
                }
            )
            out.write(line + "\n")
            written += len(line) + 1
    return records


def generate_long_line(path: Path, megabytes: int) -> int:
    """A .gz of one line of `megabytes` MB (no newline inside), then one good abstract."""
    import gzip

    rng = random.Random(1)
    piece = (" ".join(sentence(rng) for _ in range(400)) + " ").encode()
    with gzip.open(path, "wb", compresslevel=1) as out:
        written = 0
        while written < megabytes << 20:
            out.write(piece)
            written += len(piece)
        out.write(b"\n" + " ".join(sentence(rng) for _ in range(6)).encode() + b"\n")
    return 2


def child(path: Path) -> None:
    """Ingest `path` and print one JSON line of counts and seconds (runs in the child)."""
    sys.path.insert(0, str(ROOT))
    from flows.ingest import ingest

    size = path.stat().st_size
    state = {"next": 0.0}

    def progress(_: str, done: int, total: int) -> None:
        if total and done / total >= state["next"]:
            print(f"  {done / total:4.0%} of {total >> 20} MB", file=sys.stderr, flush=True)
            state["next"] += 0.1

    started = time.perf_counter()
    result = ingest([path], progress=progress)
    seconds = time.perf_counter() - started
    source = result.files[0]
    print(
        json.dumps(
            {
                "bytes": size,
                "records_seen": source.records_seen,
                "accepted": source.accepted,
                "rejected": source.rejected,
                "seconds": round(seconds, 2),
                "parts": len(result.parts),
            }
        )
    )


def measure(path: Path) -> dict:
    """Run the child on `path`; its stats plus peak RSS in MB."""
    return child_figures([sys.executable, __file__, "--child", str(path)], "ingest child")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=500, help="size of the generated file in MB")
    parser.add_argument("--limit-mb", type=int, default=LIMIT_MB, help="peak RSS allowed")
    parser.add_argument(
        "--long-line", type=int, metavar="MB", help="instead: a .gz holding one line of MB MB"
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    with tempfile.TemporaryDirectory(prefix="paperlake-bench-") as folder:
        path = Path(folder) / ("long.txt.gz" if args.long_line else "bench.jsonl")
        started = time.perf_counter()
        if args.long_line:
            records = generate_long_line(path, args.long_line)
        else:
            records = generate(path, args.mb)
        print(
            f"generated {path.stat().st_size / 2**20:.0f} MB, {records} records "
            f"in {time.perf_counter() - started:.0f} s"
        )
        stats = measure(path)
    rate = stats["records_seen"] / stats["seconds"]
    mb_rate = stats["bytes"] / 2**20 / stats["seconds"]
    print(
        f"ingest: {stats['records_seen']} records ({stats['accepted']} accepted, "
        f"{stats['rejected']} rejected) in {stats['seconds']} s: {rate:,.0f} records/s, "
        f"{mb_rate:.1f} MB/s, {stats['parts']} Parquet parts"
    )
    verdict = "within" if stats["peak_rss_mb"] <= args.limit_mb else "OVER"
    print(f"peak RSS {stats['peak_rss_mb']} MB ({verdict} the limit of {args.limit_mb} MB)")
    if verdict == "OVER":
        raise SystemExit(1)


if __name__ == "__main__":
    main()
