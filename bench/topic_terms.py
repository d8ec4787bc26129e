"""What topic_terms costs on a +1% run: all papers' tokens counted again, against counts
kept in the cache and brought up to date from the papers that changed (TermCounts).

For each size N (default 10,000 and 100,000 generated abstracts, random topics): a first
call fills a cache folder, then N/100 new abstracts arrive and a second call adds them.
Printed side by side for the second call: seconds to bring the per-paper tokens up to
date (PaperRows) and to make topic_terms from them, by the full SQL that counted every
paper's tokens each run (sql/topic_terms.sql as of FULL_SQL_COMMIT) and by the counts;
and whether both give the same rows.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import ROOT, abstracts  # noqa: E402

from flows.core.lake import read_sql  # noqa: E402
from flows.derive import paper_rows, terms  # noqa: E402

FULL_SQL_COMMIT = "eb44bc6008b4d1f8349022e81902f9ee556a7035"


def full_sql() -> str:
    """sql/topic_terms.sql when it counted every paper's tokens (read from git)."""
    show = ["git", "show", f"{FULL_SQL_COMMIT}:sql/topic_terms.sql"]
    return subprocess.run(show, cwd=ROOT, check=True, capture_output=True, text=True).stdout


def corpus(n: int, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """n + n/100 papers and their topics (about sqrt(n / 2) of them, drawn at random)."""
    total = n + n // 100
    papers = pl.DataFrame(
        {
            "paper_id": [f"p{i:07d}" for i in range(total)],
            "abstract": abstracts(total, seed),
            "links": [[] for _ in range(total)],
        },
        schema={
            "paper_id": pl.String,
            "abstract": pl.String,
            "links": pl.List(pl.Struct({"url": pl.String, "kind": pl.String})),
        },
    )
    k = max(1, round((n / 2) ** 0.5))
    topic = np.random.default_rng(seed).integers(0, k, total).astype(np.int32)
    return papers, pl.DataFrame({"paper_id": papers["paper_id"], "topic_id": topic})


def staged(papers: pl.DataFrame, topics: pl.DataFrame) -> duckdb.DuckDBPyConnection:
    """A connection holding what the aggregate stage holds when it makes topic terms."""
    from flows.core.lake import staged as stage

    tables = {"papers": papers, "paper_topics": topics, "stopwords": terms.stopwords()}
    con = stage(tables)
    con.execute(f"set variable topic_terms = {terms.TOPIC_TERMS}")
    return con


def full(con: duckdb.DuckDBPyConnection, cache: Path, sql: str) -> tuple[float, float]:
    """The tokens table from the cache, then the full SQL: seconds of each."""
    started = time.perf_counter()
    tokens = paper_rows.PaperRows(con, cache, "aggregate/paper_tokens", ("stopwords",))
    tokens.build(con, "paper_tokens", ())
    read = time.perf_counter()
    con.execute(f"create or replace table topic_terms as {sql}")
    return read - started, time.perf_counter() - read


def counted(
    con: duckdb.DuckDBPyConnection, cache: Path, topics: pl.DataFrame
) -> tuple[float, float]:
    """The tokens from the cache, then the counts brought up to date and weighed (as
    `terms.count_topic_terms` and sql/topic_terms.sql): seconds of each."""
    started = time.perf_counter()
    tokens = paper_rows.PaperRows(con, cache, "aggregate/paper_tokens", ("stopwords",))
    update = tokens.update(con)
    read = time.perf_counter()
    terms.TermCounts(cache, tokens).build(con, update, topics)
    con.execute(f"create or replace table topic_terms as {read_sql('topic_terms')}")
    return read - started, time.perf_counter() - read


def measure(n: int, sql: str, work: Path, repeats: int) -> dict[str, object]:
    """The second call's seconds (best of `repeats`, each from a copy of the first call's
    cache) by both ways, and whether their rows agree."""
    papers, topics = corpus(n)
    first = (papers.head(n), topics.head(n))
    counts_cache, full_cache = work / f"counts-{n}", work / f"full-{n}"
    started = time.perf_counter()
    counted(staged(*first), counts_cache, first[1])
    cold = time.perf_counter() - started
    full_cache.mkdir()
    for path in counts_cache.glob("aggregate-paper_tokens-*"):
        shutil.copytree(path, full_cache / path.name)  # the same tokens: both read the 1% only
    full(staged(*first), full_cache, sql)
    timings: dict[str, list[tuple[float, float]]] = {"full": [], "counts": []}
    rows: dict[str, list[tuple]] = {}
    for attempt in range(repeats):
        for way, cache in (("full", full_cache), ("counts", counts_cache)):
            copy = work / f"{way}-{n}-{attempt}"
            shutil.copytree(cache, copy)
            con = staged(papers, topics)
            if way == "full":
                timings[way].append(full(con, copy, sql))
            else:
                timings[way].append(counted(con, copy, topics))
            shutil.rmtree(copy)
            if attempt == 0:
                rows[way] = con.execute("select * from topic_terms order by all").fetchall()
    return {
        "n": n,
        "cold": cold,
        "full": min(timings["full"], key=sum),
        "counts": min(timings["counts"], key=sum),
        "same": rows["full"] == rows["counts"],
        "rows": len(rows["counts"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sql = full_sql()
    print(f"{'papers':>8} {'+1%':>5}  {'tokens s':>9}  {'full SQL s':>10}  {'counts s':>9}  "
          f"{'total s':>13}  {'same rows':>9}  (first call with counts: cold s)")  # fmt: skip
    with tempfile.TemporaryDirectory() as work:
        for n in args.sizes:
            r = measure(n, sql, Path(work), args.repeats)
            (full_read, full_terms), (counts_read, counts_terms) = r["full"], r["counts"]
            same = f"{r['same']} ({r['rows']})"
            print(
                f"{n:>8,} {n // 100:>5,}  {full_read:>4.2f} {counts_read:>4.2f}  "
                f"{full_terms:>10.2f}  {counts_terms:>9.2f}  "
                f"{full_read + full_terms:>6.2f} {counts_read + counts_terms:>6.2f}  "
                f"{same:>9}  ({r['cold']:.1f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
