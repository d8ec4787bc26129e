"""`make bench-duplicates`: peak memory of the aggregate stage on a corpus of many copies.

N papers whose vectors are all near-identical (every pair above the duplicate threshold):
the case where an uncapped pairs list grows with N^2 (5,000 such papers once reached
9.8 GB). The papers are real ingest output of a generated dump; the vectors are generated
(a base vector plus small noise), so that the model's time does not hide the stage's.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flows import ingest  # noqa: E402
from flows.core.lake import staged  # noqa: E402
from flows.core.settings import Settings  # noqa: E402
from flows.derive import build  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--papers", type=int, default=5000)
    args = parser.parse_args()
    n = args.papers

    with tempfile.TemporaryDirectory() as work:
        dump = Path(work) / "copies.txt"
        base = "We study near-duplicate submissions of one abstract across venues and years"
        texts = [
            f"{base}, copy number {i}, with the same results on the same benchmarks."
            for i in range(n)
        ]
        dump.write_text("COPIES 2026 Papers\n\n" + "\n\n".join(texts) + "\n")
        result = ingest.ingest([dump], min_words=5)
        papers, paper_sources = ingest.build_papers(result.records)

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=384) + 0.02 * rng.normal(size=(papers.height, 384))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    embeddings = pl.DataFrame(
        {
            "paper_id": papers["paper_id"].sort(),
            "embedding": pl.Series(vectors.tolist(), dtype=pl.List(pl.Float32)),
        }
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    con = staged({"papers": papers, "paper_sources": paper_sources, "sources": result.sources})
    started = time.perf_counter()
    settings = Settings(neighbors_k=10, duplicate_threshold=0.95, n_topics=5, seed=42)
    counts = build.build_tables(con, papers, embeddings, settings)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    groups = con.execute("select count(distinct group_id), max(group_size) from duplicate_groups")
    n_groups, largest = groups.fetchone()
    print(f"{papers.height} papers, every pair near-identical (cosine >= 0.95)")
    print(f"aggregate: {seconds:.1f} s; peak RSS {peak:.0f} MB (before the stage: {before:.0f} MB)")
    print(
        f"pairs kept: {counts['duplicates']} in duplicates; "
        f"duplicate_groups: {n_groups} group(s), largest {largest} papers"
    )


if __name__ == "__main__":
    main()
