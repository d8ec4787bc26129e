"""Format readers, one module per family, and the registry that detection and reading
consult.

Each module defines one `Reader` (see flows/ingest/model.py): the format names it reads,
the file extensions that promise them, how its content is told from a file's first bytes,
and `read(source, layout, override)`, which yields raw records. A new format is a new
module here and its line in READERS.
"""

from __future__ import annotations

from flows.ingest.model import Reader
from flows.ingest.readers import bibtex, delimited, json, parquet, text

# In the order FORMATS lists them (settings errors and the README do too).
READERS: tuple[Reader, ...] = (
    text.READER,
    json.READER,
    delimited.READER,
    parquet.READER,
    bibtex.READER,
)

FORMATS = tuple(fmt for reader in READERS for fmt in reader.formats)
# Format -> family, and file extension -> the family it promises.
FAMILY = {fmt: reader.family for reader in READERS for fmt in reader.formats}
EXTENSION_FORMATS = {ext: reader.family for reader in READERS for ext in reader.extensions}
# Readers that tell their formats from text, in the order they are tried.
SNIFF_ORDER = tuple(sorted((r for r in READERS if r.sniff), key=lambda r: r.sniff_order))
_BY_FORMAT = {fmt: reader for reader in READERS for fmt in reader.formats}


def reader_for(fmt: str) -> Reader:
    """The reader of a format (one of FORMATS)."""
    return _BY_FORMAT[fmt]
