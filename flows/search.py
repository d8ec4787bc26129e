"""Search a published version: semantic (dense) search over the papers' embeddings."""

from __future__ import annotations

import duckdb
import polars as pl

from flows import embed
from flows.lake import read_sql
from flows.settings import PACKAGED_MODEL, Settings


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


def dense_search(
    con: duckdb.DuckDBPyConnection, text: str, k: int, settings: Settings
) -> pl.DataFrame:
    """The k papers closest in meaning to `text`: paper_id, title, venue, year, score, abstract."""
    model = query_model(version_model(con), settings)
    vector = embed.encode([text], model, device=settings.device, show_progress=False)[0]
    return con.execute(read_sql("search/dense"), {"query": vector.tolist(), "k": k}).pl()
