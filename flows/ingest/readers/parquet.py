"""Parquet, row group by row group."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from flows.ingest.fields import ObjectFields
from flows.ingest.model import SNIPPET_CHARS, FileOverride, Found, Layout, Reader


def sniff(head: bytes) -> Found | None:
    """parquet, when the file starts with Parquet's magic bytes."""
    return ("parquet", "") if head[:4] == b"PAR1" else None


def read_parquet(path: Path, fields: ObjectFields) -> Iterator[dict]:
    """Records of a Parquet file, row group by row group.

    A record's line is its 1-based row number; its byte offset is where its row group's
    data starts in the file.
    """
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    row = 0
    for group in range(parquet.num_row_groups):
        chunk = parquet.metadata.row_group(group).column(0)
        offset = (
            chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
        )
        for batch in parquet.iter_batches(batch_size=10_000, row_groups=[group]):
            for obj in batch.to_pylist():
                row += 1
                record = {"line": row, "byte_offset": offset}
                yield fields.fill(record, obj, json.dumps(obj, default=str)[:SNIPPET_CHARS])


def read(source: Path, layout: Layout, override: FileOverride) -> Iterator[dict]:
    """Records of a Parquet file (a plain copy where it was gzipped)."""
    return read_parquet(source, ObjectFields(override.column_map))


READER = Reader(
    family="parquet",
    formats=("parquet",),
    read=read,
    extensions=(".parquet", ".pq"),
    sniff_bytes=sniff,
    needs_path=True,
)
