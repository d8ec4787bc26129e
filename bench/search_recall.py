"""Title -> own-abstract recall@1 for hybrid, dense and keyword search.

Each paper's title is the query; only abstracts are indexed (titles are left out of both
the embeddings and the BM25 index, so the match is not trivial). A hit at rank 1 is the
paper's own abstract. Uses paperlake's own search functions on a throwaway DuckDB.

    python bench/search_recall.py [CSV]
    (default: ../shared/corpora/openreview/ICLR17_submissions.csv)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from flows import embed  # noqa: E402
from flows.core.lake import connect  # noqa: E402
from flows.ingest import clean_text  # noqa: E402
from flows.read import (  # noqa: E402
    CANDIDATES,
    build_keyword_index,
    dense_ranking,
    fuse,
    keyword_ranking,
)

DEFAULT_CSV = ROOT.parent / "shared" / "corpora" / "openreview" / "ICLR17_submissions.csv"


def load(csv: Path) -> pl.DataFrame:
    """paper_id, title, abstract (cleaned), for rows with both a title and an abstract."""
    frame = pl.read_csv(csv, infer_schema=False)
    frame = frame.rename({c: c.lower() for c in frame.columns})
    return (
        frame.select(
            paper_id=pl.col("pid"),
            title=clean_text("title"),
            abstract=clean_text("abstract"),
        )
        .filter((pl.col("title") != "") & (pl.col("abstract") != ""))
        .unique("paper_id", keep="first", maintain_order=True)
    )


def recall_at_1(rankings: list[list[tuple[str, float]]], truth: list[str]) -> float:
    return sum(bool(r) and r[0][0] == t for r, t in zip(rankings, truth, strict=True)) / len(truth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("csv", nargs="?", type=Path, default=DEFAULT_CSV)
    args = parser.parse_args()
    if not args.csv.exists():
        sys.exit(f"{args.csv} not found")
    papers = load(args.csv)
    ids, titles = papers["paper_id"].to_list(), papers["title"].to_list()

    start = time.perf_counter()
    vectors = embed.encode(papers["abstract"].to_list(), show_progress=False)
    queries = embed.encode(titles, show_progress=False)
    embed_seconds = time.perf_counter() - start

    con = connect()
    indexed = papers.select("paper_id", pl.lit(None, pl.String).alias("title"), "abstract")
    con.register("indexed", indexed)
    con.execute(
        "create table papers as select *, null::varchar as venue, null::int as year from indexed"
    )
    table = pl.DataFrame(
        {"paper_id": ids, "embedding": pl.Series(vectors.tolist(), dtype=pl.List(pl.Float32))}
    )
    con.register("vectors", table)
    con.execute("create table embeddings as select * from vectors")
    pool = CANDIDATES
    with tempfile.TemporaryDirectory() as tmp:
        index = build_keyword_index(con, Path(tmp) / "index.duckdb")
        start = time.perf_counter()
        dense = [dense_ranking(con, q, pool) for q in queries]
        keyword = keyword_ranking(con, index, titles, pool)
        pairs = list(zip(dense, keyword, strict=True))
        hybrid = [fuse([d, kw], pool, "score") for d, kw in pairs]
        hybrid_rrf = [fuse([d, kw], pool, "rrf") for d, kw in pairs]
        search_seconds = time.perf_counter() - start

    scores = {
        "hybrid": recall_at_1(hybrid, ids),
        "hybrid (rrf)": recall_at_1(hybrid_rrf, ids),
        "dense": recall_at_1(dense, ids),
        "keyword": recall_at_1(keyword, ids),
    }
    print(f"{args.csv.name}: {len(ids)} papers, title -> own abstract, recall@1")
    for mode, value in scores.items():
        print(f"  {mode:<13} {value:.3f}")
    print(f"  (embedding {embed_seconds:.1f} s, {3 * len(ids)} searches {search_seconds:.1f} s)")
    ok = scores["hybrid"] >= max(scores["dense"], scores["keyword"])
    print("hybrid >= dense and keyword:", "yes" if ok else "no")


if __name__ == "__main__":
    main()
