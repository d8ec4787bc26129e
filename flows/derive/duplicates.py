"""Near-duplicates: the pairs and neighbours read off each paper's candidate lists, and the
groups the pairs join papers into."""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from flows.derive.neighbours import split_candidates

# The frames the tables of sql/ read the lists through (`list_frames`).
LIST_FRAMES = ("neighbor_candidates", "similar_pairs", "pair_groups")


def list_frames(found: pl.DataFrame, k: int, threshold: float) -> dict[str, pl.DataFrame]:
    """The frames of LIST_FRAMES from each paper's candidate lists `found`: its top k
    (with their rank), its pairs at cosine >= `threshold` and the groups they make."""
    top, pairs = split_candidates(found, k, threshold)
    return {"neighbor_candidates": top, "similar_pairs": pairs, "pair_groups": group_pairs(pairs)}


def group_pairs(pairs: pl.DataFrame) -> pl.DataFrame:
    """Near-duplicate groups: the connected components of the pairs graph.

    Returns:
        pair_groups: paper_id, group_id (the smallest paper_id of its group) and
        group_size, for every paper in a pair.
    """

    schema = {"paper_id": pl.String, "group_id": pl.String, "group_size": pl.Int64}
    edges = pairs.filter(pl.col("paper_id") != pl.col("neighbor_id"))
    members = pl.concat([edges["paper_id"], edges["neighbor_id"]]).unique().sort()
    if members.is_empty():
        return pl.DataFrame(schema=schema)
    position = {paper: i for i, paper in enumerate(members.to_list())}
    rows = np.fromiter((position[p] for p in edges["paper_id"]), np.int64, edges.height)
    cols = np.fromiter((position[p] for p in edges["neighbor_id"]), np.int64, edges.height)
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(members),) * 2)
    _, labels = connected_components(graph, directed=False)
    return (
        pl.DataFrame({"paper_id": members, "component": labels})
        .with_columns(
            group_id=pl.col("paper_id").min().over("component"),
            group_size=pl.len().over("component").cast(pl.Int64),
        )
        .select(list(schema))
    )
