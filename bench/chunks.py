"""One big JSON Lines file ingested whole, in chunks in one process, and in chunks on a
Dask LocalCluster (a job a chunk, as `--cluster local:N` fans them out): seconds each, and
whether the three give the same sources row, records and rejects.

    .venv/bin/python bench/chunks.py --mb 300 --workers 2
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import sentences  # noqa: E402

from flows import ingest  # noqa: E402
from flows.ingest.cache import ParseCache  # noqa: E402

WHOLE = ingest.Chunking(file_bytes=1 << 50)


def write_jsonl(path: Path, megabytes: int, seed: int = 0) -> int:
    """A JSON Lines file of about `megabytes` MB of arXiv-like records; how many."""
    pool, rng = sentences(), random.Random(seed)
    target, n = megabytes << 20, 0
    with path.open("w", encoding="utf-8") as out:
        while out.tell() < target:
            record = {
                "id": f"bench.{n:07d}",
                "title": " ".join(rng.sample(pool, 1)[0].split()[:10]),
                "authors": ", ".join(f"Author {rng.randrange(5000)}" for _ in range(3)),
                "abstract": " ".join(rng.sample(pool, rng.randint(5, 9))) + f" Record {n}.",
            }
            out.write(json.dumps(record) + "\n")
            n += 1
    return n


def timed(label: str, read) -> tuple[float, ingest.IngestResult]:
    start = time.perf_counter()
    result = read()
    seconds = time.perf_counter() - start
    print(f"{label:<34} {seconds:8.1f} s", flush=True)
    return seconds, result


def on_cluster(
    raw: Path, cache: Path, workers: int, chunking: ingest.Chunking
) -> ingest.IngestResult:
    """The chunks parsed on a LocalCluster of `workers` processes, then put together."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        jobs = ingest.pending_parses([raw], 20, None, cache, chunking)
        parses = ParseCache(cache, 20)
        client.gather(client.map(ingest.parse_into_cache, jobs, cache=parses, pure=False))
    return ingest.ingest([raw], cache_dir=cache, chunking=chunking)


def same(a: ingest.IngestResult, b: ingest.IngestResult) -> bool:
    return all(getattr(a, t).equals(getattr(b, t)) for t in ("sources", "records", "rejects"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--chunk-mb", type=int, default=ingest.CHUNKING.chunk_bytes >> 20)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="paperlake-chunks-"))
    try:
        raw = work / "raw"
        raw.mkdir()
        path = raw / "big.jsonl"
        n = write_jsonl(path, args.mb)
        size = path.stat().st_size
        print(f"{path.name}: {size / 2**20:.0f} MB, {n:,} records")
        chunking = ingest.Chunking(file_bytes=1, chunk_bytes=args.chunk_mb << 20)
        print(f"chunks of {args.chunk_mb} MB")
        whole_s, whole = timed("whole, one process", lambda: ingest.ingest(
            [raw], cache_dir=work / "c1", chunking=WHOLE))  # fmt: skip
        chunk_s, chunked = timed("chunks, one process", lambda: ingest.ingest(
            [raw], cache_dir=work / "c2", chunking=chunking))  # fmt: skip
        print(f"{'':<34} same: {same(chunked, whole)}")
        if args.workers:
            label = f"chunks, LocalCluster of {args.workers}"
            _, spread = timed(label, lambda: on_cluster(raw, work / "c3", args.workers, chunking))
            print(f"{'':<34} same: {same(spread, whole)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
