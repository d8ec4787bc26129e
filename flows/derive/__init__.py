"""Derive: the tables built from the papers and their vectors (neighbours, near-duplicates,
topics and their terms, mentions, the map, per-venue and per-topic stats), in DuckDB from
sql/, carrying the last version's topics, map and neighbour lists over.

Modules:
    build            the stage's entry (`derive_tables`) and the SQL tables, in order
    neighbours       exact and index search, top-k, candidate lists, row ranges for workers
    ann              the HNSW graph a search builds, and the IVF index kept per model
    kept_graph       the HNSW graph kept per model between runs (auto's, above the exact limit)
    neighbour_lists  the lists kept between runs, updated for what changed (`search_lists`)
    duplicates       near-duplicate pairs and the groups they make
    topics           k-means topics, or the last version's carried over
    topic_groups     new topics from what fits no old one (average linkage)
    terms            stop words and the papers of each topic using each term
    mentions         the vocabulary of benchmarks and datasets, and its SQL macros
    paper_rows       per-paper SQL rows kept in the cache (`PaperRows`)
    map              the t-SNE map of papers
"""

from __future__ import annotations

from flows.derive.build import LastVersion, derive_tables
from flows.derive.neighbours import PAIR_CAP, search_rows

__all__ = ["PAIR_CAP", "LastVersion", "derive_tables", "search_rows"]
