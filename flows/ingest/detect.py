"""Format detection: a file's first bytes, told apart by the registered readers' sniffs
and checked against its name and settings."""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import IO

from flows.ingest.model import NO_OVERRIDE, FileOverride, Found, IngestError
from flows.ingest.rawfile import HASH_CHUNK, HashingReader, open_regular
from flows.ingest.readers import EXTENSION_FORMATS, FAMILY, READERS, SNIFF_ORDER, reader_for

SNIFF_BYTES = 64 << 10
# Control bytes that no text holds (tab, line feed, carriage return and form feed it does).
CONTROL_BYTES = bytes(b for b in range(32) if b not in b"\t\n\r\f")


def open_binary(
    path: Path, gz: bool, stack: ExitStack
) -> tuple[IO[bytes], Callable[[], int], Callable[[], tuple[str, int]]]:
    """The file's bytes (decompressed for gzip), a function telling how far reading got, and
    one giving the sha256 and size of the file's bytes that were read (see HashingReader).

    For gzip the position is in the compressed file; offsets of records are in the
    decompressed stream.
    """
    raw = stack.enter_context(HashingReader(open_regular(path)))
    stream = io.BufferedReader(raw, HASH_CHUNK)
    if gz:
        stream = stack.enter_context(gzip.GzipFile(fileobj=stream, mode="rb"))
    return stream, raw.tell, raw.digest


def sniff_data(data: bytes) -> tuple[bool, bytes]:
    """`sniff` of a file read whole."""
    if data[:2] != b"\x1f\x8b":
        return False, data[:SNIFF_BYTES]
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as unpacked:
            return True, unpacked.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise IngestError(f"gzip data that cannot be decompressed ({exc})") from None


def sniff(path: Path) -> tuple[bool, bytes]:
    """Whether the file is gzip, and its first bytes (decompressed)."""
    with io.BufferedReader(open_regular(path)) as handle:
        head = handle.read(SNIFF_BYTES)
        if head[:2] != b"\x1f\x8b":
            return False, head
        handle.seek(0)
        try:
            with gzip.GzipFile(fileobj=handle, mode="rb") as unpacked:
                return True, unpacked.read(SNIFF_BYTES)
        except (OSError, EOFError, zlib.error) as exc:
            raise IngestError(f"gzip data that cannot be decompressed ({exc})") from None


def detect_format(
    head: bytes, name: str = "", override: FileOverride = NO_OVERRIDE
) -> tuple[str, str]:
    """The format of a file from its first bytes, checked against its settings.

    Returns:
        format (one of FORMATS) and, for csv/tsv, the delimiter.

    Raises:
        IngestError: the content is empty, binary or not UTF-8 text, or not the format its
            settings claim.
    """
    columns = override.column_map
    found = _sniff(head, columns)
    claimed = override.format
    if claimed and reader_for(claimed).claims_any_text:
        return claimed, ""
    if claimed:
        # Within a family the content decides (JSON Lines or array, comma or tab).
        if FAMILY.get(found[0]) != FAMILY[claimed]:
            raise IngestError(f"settings say {claimed} but the content looks like {found[0]}")
        return found
    expected = _name_family(name)
    named = next((r for r in READERS if r.family == expected and r.sniff_named), None)
    if named and FAMILY.get(found[0]) != expected:
        # A table whose header names no abstract column is still read as a table, so that
        # each row is counted and rejected with the header's names, not taken as prose.
        return named.sniff_named(_text_head(head), columns) or found
    return found


def _sniff(head: bytes, columns: Mapping[str, str]) -> Found:
    """The first format a reader finds in the head: binary formats by their bytes, then the
    text formats in their sniff order (plain text, which takes anything, last)."""
    for reader in READERS:
        if reader.sniff_bytes and (found := reader.sniff_bytes(head)):
            return found
    text = _text_head(head)
    for reader in SNIFF_ORDER:
        if found := reader.sniff(text, columns):
            return found
    raise IngestError("no reader recognises the content")


def _name_family(name: str) -> str | None:
    return EXTENSION_FORMATS.get(Path(name.removesuffix(".gz")).suffix.lower())


def name_mismatch(fmt: str, name: str) -> str | None:
    """A note when the file's name promises another format than its content has."""
    expected = _name_family(name)
    if expected is None or FAMILY.get(fmt) == expected:
        return None
    suffix = Path(name.removesuffix(".gz")).suffix.lower()
    return f"named {suffix} but the content is {fmt}; read as {fmt}"


def _text_head(head: bytes) -> str:
    """The first bytes as text, or an error saying why they are not UTF-8 text."""
    if not head.strip():
        raise IngestError("file is empty")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise IngestError("UTF-16 text; paperlake reads UTF-8")
    # Binary formats are full of NUL bytes; a stray one in text is a record's problem.
    if head.count(b"\x00") > max(2, len(head) // 100):
        raise IngestError("binary content (NUL bytes), not text")
    controls = len(head) - len(head.translate(None, CONTROL_BYTES))
    if controls > len(head) * 0.05:
        raise IngestError("binary content (control bytes), not text")
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if text.count("\ufffd") > len(text) * 0.3:
        raise IngestError("undecodable: the content is not UTF-8 text")
    return text
