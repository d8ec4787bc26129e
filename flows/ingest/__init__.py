"""Ingest: raw files into records, each either accepted (a paper location) or rejected.

A file's format is told by its content; its name is a hint and a check. Readers stream
each file and yield raw records with their 1-based line and byte offset; cleaning runs
as polars expressions over batches of records; accepted records are spilled to Parquet
parts, so memory stays bounded whatever the size of the input.

A plain JSON Lines or CSV/TSV file of CHUNKING.file_bytes or more is read as byte-range
chunks, one parse each (side by side on a cluster), with the records, provenance and
sources row of a whole read.

Formats: the sample format (a header line naming venue and year, then abstracts
separated by blank lines), one abstract per line, JSON Lines (the arXiv OAI snapshot
among them), JSON arrays, CSV and TSV with a header, Parquet, BibTeX, and the gzip of
each.
A `paperlake.toml` beside the raw files can set format, venue, year and columns per file.

Modules, in the order a file meets them:
    paths       finding raw files, their digests and places below the raw folder
    rawfile     what a path is, its name as text, its bytes opened and hashed as read
    overrides   paperlake.toml settings per file
    metadata    venue and year from header line, settings and path
    detect      the format from a file's first bytes, through the readers' sniffs
    readers/    one module per format family, each registering one Reader
    fields      field values (text, lists, authors, years) and column names
    clean       cleaning, links, flags, content ids; accepted and rejected records
    prose       records that are code, dictionaries or tables (not_prose)
    anomalies   a file's character statistics: a lost letter, mojibake, entities
    cache       Parquet parts and the parse cache
    read        one file into cleaned records and the sources row of what was read
    chunks      a big JSON Lines or CSV file planned as byte ranges that start at records
    chunked     each chunk parsed on its own, the chunks put together as a whole read
    batch       small files read one by one, parsed together
    collect     every file (or its cached parse) into one IngestResult
    jobs        the parses a cluster does first: whole files or chunks
    results     papers and their locations, the per-file report, a progress bar
    texts       the abstracts held back from the run's frames (core/held.py), read back
    model       what they share: schemas, rules, a file's layout and settings, Reader
"""

from __future__ import annotations

from flows.ingest.cache import ParseCache
from flows.ingest.clean import (
    URL_TRAILING,
    classify_link,
    clean_text,
    content_id,
    extract_links,
    normalise,
    normalise_contained,
)
from flows.ingest.collect import IngestResult, ingest
from flows.ingest.detect import detect_format, name_mismatch, sniff
from flows.ingest.fields import (
    ALIAS_FIELD,
    FIELD_ALIASES,
    ObjectFields,
    as_text,
    column_key,
    fill_fields,
    map_columns,
    parse_authors,
    parse_list,
    parse_year,
    record_fields,
    short_text,
)
from flows.ingest.jobs import parse_into_cache, pending_parses
from flows.ingest.metadata import parse_header, venue_from_name
from flows.ingest.model import (
    CHUNKING,
    FILE_ERRORS,
    INGEST_VERSION,
    NO_OVERRIDE,
    RECORD_SCHEMA,
    REJECT_RULES,
    REJECT_SCHEMA,
    SOURCE_SCHEMA,
    Chunking,
    FileOverride,
    IngestError,
    Layout,
    ParseJob,
    Reader,
    SourceFile,
)
from flows.ingest.overrides import Overrides, load_settings
from flows.ingest.paths import (
    DigestMemo,
    discover,
    file_digest,
    input_digests,
    raw_place,
    try_digest,
)
from flows.ingest.rawfile import shown
from flows.ingest.read import ingest_file, record_batches
from flows.ingest.readers import FORMATS, READERS, reader_for
from flows.ingest.readers.delimited import read_delimited
from flows.ingest.readers.json import read_json_stream, read_jsonl
from flows.ingest.readers.parquet import read_parquet
from flows.ingest.readers.shifted import ANCHOR_SHAPES, anchor_columns, repair_row, split_fields
from flows.ingest.readers.text import read_text
from flows.ingest.results import build_papers, file_report, reading_progress
from flows.ingest.texts import RecordTexts

__all__ = [
    "ALIAS_FIELD",
    "CHUNKING",
    "ANCHOR_SHAPES",
    "FIELD_ALIASES",
    "Chunking",
    "FILE_ERRORS",
    "FORMATS",
    "INGEST_VERSION",
    "NO_OVERRIDE",
    "READERS",
    "RECORD_SCHEMA",
    "REJECT_RULES",
    "REJECT_SCHEMA",
    "SOURCE_SCHEMA",
    "URL_TRAILING",
    "FileOverride",
    "IngestError",
    "IngestResult",
    "ParseJob",
    "Layout",
    "ObjectFields",
    "Overrides",
    "ParseCache",
    "RecordTexts",
    "Reader",
    "SourceFile",
    "anchor_columns",
    "as_text",
    "build_papers",
    "classify_link",
    "clean_text",
    "column_key",
    "content_id",
    "detect_format",
    "discover",
    "extract_links",
    "DigestMemo",
    "file_digest",
    "try_digest",
    "file_report",
    "fill_fields",
    "ingest",
    "ingest_file",
    "input_digests",
    "load_settings",
    "map_columns",
    "name_mismatch",
    "normalise",
    "normalise_contained",
    "parse_authors",
    "parse_header",
    "parse_list",
    "parse_into_cache",
    "parse_year",
    "pending_parses",
    "ParseCache",
    "raw_place",
    "read_delimited",
    "read_json_stream",
    "read_jsonl",
    "read_parquet",
    "read_text",
    "reader_for",
    "reading_progress",
    "record_batches",
    "record_fields",
    "repair_row",
    "short_text",
    "shown",
    "sniff",
    "split_fields",
    "venue_from_name",
]
