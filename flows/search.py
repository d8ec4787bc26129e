"""Search a published version: dense (embeddings), keyword (BM25) and hybrid (fused by RRF)."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from flows import embed
from flows.lake import LAKE, connect, read_sql
from flows.settings import PACKAGED_MODEL, Settings

MODES = ("hybrid", "dense", "keyword")
FUSIONS = ("score", "rrf")
RRF_K = 60  # the constant of reciprocal rank fusion (Cormack et al., 2009)
CANDIDATES = 100  # hits each retriever hands to the fusion


def version_model(con: duckdb.DuckDBPyConnection) -> str:
    """The model id the attached version's embeddings were made with."""
    row = con.execute("select any_value(model) from embeddings").fetchone()
    if row is None or row[0] is None:
        raise ValueError("this version has no embeddings")
    return row[0]


def query_model(model_id: str, settings: Settings) -> str:
    """The local model that embeds queries for vectors made by `model_id`."""
    if model_id.endswith(f"/{PACKAGED_MODEL}"):
        return PACKAGED_MODEL
    if settings.model != PACKAGED_MODEL:
        return settings.model
    raise ValueError(
        f"this version was embedded with {model_id}; pass --model with its local folder"
    )


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    """The snapshot the connection reads (latest, or the one it was attached at)."""
    return con.execute(f"select * from {LAKE}.current_snapshot()").fetchone()[0]


def index_path(settings: Settings, version: int) -> Path:
    return settings.cache_path / "search" / f"v{version}.duckdb"


def build_keyword_index(con: duckdb.DuckDBPyConnection, path: Path) -> Path:
    """Write the full-text (BM25) index of the attached version's papers to `path`.

    DuckLake tables take no indexes, so the index lives beside the catalog, one file per
    version; it is written under a temporary name and moved into place whole.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    docs = con.execute(read_sql("search/docs")).arrow()
    index = connect(str(tmp))
    try:
        index.register("docs_frame", docs)
        index.execute("create table docs as select * from docs_frame")
        index.execute(
            "pragma create_fts_index('docs', 'paper_id', 'text', stemmer = 'porter', "
            "stopwords = 'english', overwrite = 1)"
        )
    finally:
        index.close()
    os.replace(tmp, path)
    return path


def keyword_index(con: duckdb.DuckDBPyConnection, settings: Settings) -> Path:
    """The keyword index file of the attached version, built on first use."""
    path = index_path(settings, current_version(con))
    if not path.exists():
        build_keyword_index(con, path)
    return path


def keyword_ranking(
    con: duckdb.DuckDBPyConnection, index: Path, texts: list[str], k: int
) -> list[list[tuple[str, float]]]:
    """For each text, the k best papers by BM25 over the indexed title and abstract."""
    current = con.execute("select current_database()").fetchone()[0]
    con.execute(f"attach '{index}' as keyword_index (read_only)")
    try:
        con.execute("use keyword_index")
        sql = read_sql("search/keyword")
        return [con.execute(sql, {"text": text, "k": k}).fetchall() for text in texts]
    finally:
        con.execute(f"use {current}")
        con.execute("detach keyword_index")


def dense_ranking(
    con: duckdb.DuckDBPyConnection,
    vector: np.ndarray,
    k: int,
    venue: str | None = None,
    year: int | None = None,
    exclude: str | None = None,
) -> list[tuple[str, float]]:
    """The k papers whose embeddings are closest to `vector` (exact cosine)."""
    params = {"query": vector.tolist(), "k": k, "venue": venue, "year": year, "exclude": exclude}
    return con.execute(read_sql("search/dense"), params).fetchall()


def fuse(
    rankings: list[list[tuple[str, float]]],
    k: int,
    method: str = "score",
    rrf_k: int = RRF_K,
) -> list[tuple[str, float]]:
    """Fuse ranked lists of (paper_id, score) into one.

    `score`: each list's scores are min-max scaled to [0, 1] and summed with equal
    weights (an id missing from a list gets 0 there). `rrf`: reciprocal rank fusion, each
    list adds 1 / (rrf_k + rank). On ICLR 2017 title -> abstract search
    (bench/search_recall.py) score fusion puts the right abstract first more often than
    RRF, which ignores how far apart the scores are.
    """
    if method not in FUSIONS:
        raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, not {method!r}")
    fused: dict[str, float] = {}
    for ranking in rankings:
        if not ranking:
            continue
        values = [score for _, score in ranking]
        low, high = min(values), max(values)
        for rank, (paper_id, score) in enumerate(ranking, start=1):
            if method == "rrf":
                part = 1.0 / (rrf_k + rank)
            else:
                part = (score - low) / (high - low) if high > low else 1.0
            fused[paper_id] = fused.get(paper_id, 0.0) + part
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]


def hits(
    con: duckdb.DuckDBPyConnection,
    ranked: list[tuple[str, float]],
    venue: str | None = None,
    year: int | None = None,
) -> pl.DataFrame:
    """paper_id, title, venue, year, score, abstract for ranked ids, in rank order."""
    payload = [{"paper_id": pid, "score": score} for pid, score in ranked]
    schema = {
        "paper_id": pl.String, "title": pl.String, "venue": pl.String, "year": pl.Int32,
        "score": pl.Float64, "abstract": pl.String,
    }  # fmt: skip
    if not payload:
        return pl.DataFrame(schema=schema)
    return con.execute(
        read_sql("search/hits"), {"ranked": payload, "venue": venue, "year": year}
    ).pl()


def encode_query(con: duckdb.DuckDBPyConnection, text: str, settings: Settings) -> np.ndarray:
    model = query_model(version_model(con), settings)
    return embed.encode([text], model, device=settings.device, show_progress=False)[0]


def search(
    con: duckdb.DuckDBPyConnection,
    text: str,
    settings: Settings,
    k: int = 10,
    mode: str = "hybrid",
    venue: str | None = None,
    year: int | None = None,
    fusion: str = "score",
) -> pl.DataFrame:
    """The k best papers for `text`: dense, keyword, or both fused (see `fuse`)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    pool = max(CANDIDATES, 5 * k)
    rankings = []
    if mode in ("dense", "hybrid"):
        vector = encode_query(con, text, settings)
        rankings.append(dense_ranking(con, vector, pool, venue, year))
    if mode in ("keyword", "hybrid"):
        rankings.append(keyword_ranking(con, keyword_index(con, settings), [text], pool)[0])
    ranked = fuse(rankings, pool, fusion) if mode == "hybrid" else rankings[0]
    return hits(con, ranked, venue, year).head(k)


def dense_search(
    con: duckdb.DuckDBPyConnection, text: str, k: int, settings: Settings
) -> pl.DataFrame:
    """The k papers closest in meaning to `text`."""
    return search(con, text, settings, k=k, mode="dense")


def similar(con: duckdb.DuckDBPyConnection, paper_id: str, k: int = 10) -> pl.DataFrame:
    """The k papers closest to a published paper, by its own embedding."""
    row = con.execute("select embedding from embeddings where paper_id = ?", [paper_id]).fetchone()
    if row is None:
        raise ValueError(f"no paper {paper_id} in this version")
    ranked = dense_ranking(con, np.asarray(row[0], dtype=np.float32), k, exclude=paper_id)
    return hits(con, ranked)
