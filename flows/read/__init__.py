"""Read: what people ask of a published version, none of which writes to the catalog.

Modules:
    query         `paperlake query`: read-only SQL on a version, locked down
    search        dense, keyword and hybrid search of a version (`Corpus`), similar papers
    ranking       the retrievers of a search and their fusion
    hits          a search's hits as a person reads them, and whether one is a good match
    search_index  the keyword (BM25) index of a version, beside the catalog
    report        the version's self-contained HTML report
    figures       the report's figures, and what changed since the version before
    paper_map     the report's map of papers
    export        a version's table as a Parquet, CSV or JSON Lines file
    plain_duckdb  the SQL that opens a version in a plain DuckDB (CLI, Python, ...)
    catalog_copy  a long-lived reader's own copy of a DuckDB-file catalog (runs never wait)
"""

from flows.read.catalog_copy import CatalogCopy, reader_of
from flows.read.export import FORMATS, export_format, export_table, lake_tables
from flows.read.hits import MIN_COSINE, no_good_match
from flows.read.paper_map import short_label
from flows.read.plain_duckdb import duckdb_setup
from flows.read.query import run_query
from flows.read.ranking import dense_ranking, fuse, keyword_ranking
from flows.read.report import write_report
from flows.read.search import (
    CANDIDATES,
    MODES,
    Corpus,
    dense_search,
    search_papers,
    similar_papers,
    unmatched_topic,
)
from flows.read.search_index import build_keyword_index

__all__ = [
    "CANDIDATES",
    "FORMATS",
    "CatalogCopy",
    "MIN_COSINE",
    "MODES",
    "Corpus",
    "build_keyword_index",
    "dense_ranking",
    "dense_search",
    "duckdb_setup",
    "export_format",
    "export_table",
    "fuse",
    "keyword_ranking",
    "lake_tables",
    "no_good_match",
    "reader_of",
    "run_query",
    "search_papers",
    "short_label",
    "similar_papers",
    "unmatched_topic",
    "write_report",
]
