"""BibTeX: one record per entry (@article, @inproceedings, ...), read as a stream.

A record's line and byte offset are those of its entry's `@`. The citation key is its
external id, `booktitle` or `journal` its venue, `author` its authors (split on "and";
"Last, First" becomes "First Last"). Titles and abstracts keep their TeX and braces for
cleaning; the other fields lose braces and TeX accents here. @string macros are expanded;
@comment and @preamble entries are not records. An entry without an abstract field is
rejected as `empty_abstract`, like a JSON object without one.

An entry whose braces do not balance (still open at the next line that starts with `@`,
or closed early so that a stray `}` follows it) is an `unparseable_row` reject, and
reading goes on at the next line that starts with `@`.

Hand-written because no library reads like this: bibtexparser 2.x and pybtex both parse a
whole file held as one string and give no byte offsets; bibtexparser leaves `#`
concatenations unresolved and takes an entry closed early as whole; in pybtex an
unclosed brace swallows the entries after it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from typing import IO

from flows.ingest.clean import TEX_ACCENT_LETTERS, TEX_ACCENT_PATTERNS
from flows.ingest.fields import ObjectFields
from flows.ingest.model import FileOverride, Found, Layout, Reader
from flows.ingest.readers.common import numbered_lines, snippet, valid_text

# An entry still open after this many bytes is taken as broken, so memory stays bounded.
MAX_ENTRY_BYTES = 16 << 20
ENTRY_RE = re.compile(r"@\s*([A-Za-z][\w:.+-]*)\s*([{(])")
ENTRY_TYPE_RE = re.compile(r"@\s*(\w*)")
FIELD_RE = re.compile(r"([^\s=,{}\"#()]+)\s*=\s*")
WORD_RE = re.compile(r"[^\s,#{}\"=()]+")
SPACE_RE = re.compile(r"\s*")
GAP_RE = re.compile(r"[\s,]*")
AND_RE = re.compile(r"\s+and\s+", re.IGNORECASE)
COMMA_RE = re.compile(r"\s*,\s*")
ESCAPE_RE = re.compile(r"\\([%&_#$])")
DELIMITER_RE = re.compile(r'[{}()"]')
VALUE_END_RE = re.compile(r'[{}"]')
# Entries that hold no record.
NOT_RECORDS = ("comment", "preamble", "string")
# Fields cleaned later with the rest of the text (titles, abstracts) or kept as written.
KEPT_FIELDS = ("external_id", "title_raw", "abstract_raw")
_ACCENTS = dict(zip(TEX_ACCENT_PATTERNS, TEX_ACCENT_LETTERS, strict=True))
_ACCENT_RE = re.compile("|".join(map(re.escape, sorted(_ACCENTS, key=len, reverse=True))))


class BibError(ValueError):
    """An entry that cannot be read; the message says why."""


def sniff(text: str, columns: Mapping[str, str]) -> Found | None:
    """bibtex, when the first line that is neither blank nor a % comment opens an entry."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("%"):
            return ("bibtex", "") if ENTRY_RE.match(stripped) else None
    return None


def read_bibtex(stream: IO[bytes], fields: ObjectFields) -> Iterator[dict]:
    """Records of a BibTeX file, one per entry; text outside entries is a comment.

    The stream is cut into regions, each from a line that starts with `@` to the next
    one; a region normally holds one entry, and a broken entry costs its region alone.
    """
    macros: dict[str, str] = {}
    region: list[bytes] = []
    line_no = offset = size = 0  # where the region starts, and its length so far
    for number, start, line in numbered_lines(stream):
        if line.lstrip().startswith(b"@"):
            if region:
                yield from _read_region(b"".join(region), line_no, offset, fields, macros)
            region, line_no, offset, size = [line], number, start, len(line)
            continue
        if not region:
            continue  # before the first entry, or the rest of one too long to keep
        region.append(line)
        size += len(line)
        if size > MAX_ENTRY_BYTES:
            yield {
                "line": line_no,
                "byte_offset": offset + len(region[0]) - len(region[0].lstrip()),
                "read_rule": "unparseable_row",
                "read_reason": f"BibTeX entry still open after {MAX_ENTRY_BYTES} bytes: its "
                "braces do not balance; reading goes on at the next line starting with @",
                "raw_snippet": snippet(region[0]),
            }
            region = []
    if region:
        yield from _read_region(b"".join(region), line_no, offset, fields, macros)


def _read_region(
    raw: bytes, line_no: int, offset: int, fields: ObjectFields, macros: dict[str, str]
) -> Iterator[dict]:
    """The records of one region (its entries, each located by its `@`)."""
    text = raw.decode("utf-8", "surrogateescape")
    at: int | None = text.index("@")
    seen = 0  # the last entry's place in `text`, counted on from there
    while at is not None:
        line_no += text.count("\n", seen, at)
        offset += len(text[seen:at].encode("utf-8", "surrogateescape"))
        seen = at
        record: dict = {"line": line_no, "byte_offset": offset}
        try:
            kind, body, end = _entry(text, at)
        except BibError as exc:
            if ENTRY_TYPE_RE.match(text, at).group(1).lower() not in NOT_RECORDS:
                reason = f"{exc}; reading goes on at the next line starting with @"
                yield _broken(record, reason, text[at : at + 1000])
            return
        # Another entry may follow on the same line; any other text after it is a comment.
        following = ENTRY_RE.match(text, SPACE_RE.match(text, end).end())
        after = "" if following else text[end:]
        entry = text[at:end]
        at = following.start() if following else None
        if kind == "string":
            # A broken macro leaves its uses spelled as written.
            with contextlib.suppress(BibError):
                macros.update(_fields(valid_text(body), macros))
        if kind in NOT_RECORDS:
            continue
        stray = _stray_brace(after)
        if stray is not None:
            line = record["line"] + entry.count("\n") + after.count("\n", 0, stray)
            reason = (
                f"BibTeX entry's braces do not balance: it closed early, and a stray }} "
                f"follows at line {line}"
            )
            yield _broken(record, reason, entry)
            continue
        yield _record(record, body, entry, fields, macros)


def _entry(text: str, at: int) -> tuple[str, str, int]:
    """An entry's type (lowercase), its body between the delimiters, and where it ends."""
    match = ENTRY_RE.match(text, at)
    if not match:
        raise BibError("BibTeX entry cannot be read: no { or ( after its @type")
    kind, opener, start = match.group(1).lower(), match.group(2), match.end()
    depth, quoted = 0, False
    for found in DELIMITER_RE.finditer(text, start):
        char, pos = found.group(), found.start()
        if char == "{":
            depth += 1
        elif char == "}" and depth:
            depth -= 1
        elif char == "}" and opener == "{":
            return kind, text[start:pos], pos + 1
        elif char == "}":
            raise BibError("BibTeX entry's braces do not balance: a } closes none")
        elif depth == 0 and opener == "(" and char == '"':
            quoted = not quoted
        elif depth == 0 and opener == "(" and char == ")" and not quoted:
            return kind, text[start:pos], pos + 1
    raise BibError(f"BibTeX entry's braces do not balance: {depth + 1} left open")


def _stray_brace(text: str) -> int | None:
    """Where a `}` lies in the text after an entry, % comments aside: the mark of an entry
    that an extra `}` closed early."""
    pos = 0
    for line in text.splitlines(keepends=True):
        found = line.find("}")
        if found >= 0 and not line.lstrip().startswith("%"):
            return pos + found
        pos += len(line)
    return None


def _broken(record: dict, reason: str, raw: str) -> dict:
    return record | {
        "read_rule": "unparseable_row",
        "read_reason": reason,
        "raw_snippet": snippet(valid_text(raw)),
    }


def _record(
    record: dict, body: str, entry: str, fields: ObjectFields, macros: Mapping[str, str]
) -> dict:
    """An entry's record: its citation key and fields, short fields made plain text."""
    try:
        entry.encode("utf-8", "surrogateescape").decode("utf-8")
    except UnicodeDecodeError as exc:
        record["decode_error"] = f"invalid UTF-8 at byte {record['byte_offset'] + exc.start}"
        body, entry = valid_text(body), valid_text(entry)
    key, _, rest = body.partition(",")
    if "=" in key:  # no citation key: the body is all fields
        key, rest = "", body
    try:
        values = _fields(rest, macros)
    except BibError as exc:
        return _broken(record, str(exc), entry)
    # The key comes first, so that it is the id even where a field such as pmid is one too.
    obj = {"id": key.strip()} | {name: v for name, v in values.items() if name != "id"}
    for target, name in fields.keys_for(obj).items():
        if target == "authors":
            obj[name] = bib_authors(obj[name])
        elif target not in KEPT_FIELDS:
            obj[name] = plain_tex(obj[name])
    return fields.fill(record, obj, entry)


def _fields(text: str, macros: Mapping[str, str]) -> dict[str, str]:
    """Field name (lowercase) -> value, from `name = value, ...`; a repeated name keeps its
    first value, as BibTeX does."""
    values: dict[str, str] = {}
    pos = GAP_RE.match(text).end()
    while pos < len(text):
        match = FIELD_RE.match(text, pos)
        if not match:
            raise BibError(
                f"BibTeX entry cannot be read: no field name and = at {_near(text, pos)}"
            )
        name = match.group(1).lower()
        value, pos = _value(text, match.end(), macros)
        if pos < len(text) and text[pos] != ",":
            raise BibError(f"BibTeX entry cannot be read: no comma after the {name} field")
        values.setdefault(name, value)
        pos = GAP_RE.match(text, pos).end()
    return values


def _value(text: str, pos: int, macros: Mapping[str, str]) -> tuple[str, int]:
    """A field's value ({braced}, "quoted", a number or a macro, joined by #) and where the
    text after it starts."""
    parts = []
    while True:
        if text.startswith(("{", '"'), pos):
            end = _closing(text, pos)
            parts.append(text[pos + 1 : end])
            pos = end + 1
        elif word := WORD_RE.match(text, pos):
            parts.append(macros.get(word.group().lower(), word.group()))
            pos = word.end()
        else:
            raise BibError(f"BibTeX entry cannot be read: no value at {_near(text, pos)}")
        pos = SPACE_RE.match(text, pos).end()
        if not text.startswith("#", pos):
            return "".join(parts), pos
        pos = SPACE_RE.match(text, pos + 1).end()


def _closing(text: str, pos: int) -> int:
    """Where the brace or quote opening a value at `pos` is closed (braces inside count)."""
    opener = text[pos]
    depth = 1 if opener == "{" else 0
    for found in VALUE_END_RE.finditer(text, pos + 1):
        char = found.group()
        depth += (char == "{") - (char == "}")
        if depth < 0:
            break
        if depth == 0 and char == ("}" if opener == "{" else '"'):
            return found.start()
    raise BibError(f"BibTeX entry cannot be read: a value is not closed at {_near(text, pos)}")


def _near(text: str, pos: int) -> str:
    return repr(text[pos : pos + 30])


def plain_tex(text: str) -> str:
    """A short field as plain text: TeX accents resolved, escapes, braces and ties dropped,
    whitespace collapsed ({\\"O}zt{\\"u}rk is Öztürk, A.~B. is A. B.)."""
    if "\\" in text:
        text = _ACCENT_RE.sub(lambda m: _ACCENTS[m.group()], text)
        text = ESCAPE_RE.sub(r"\1", text)
    return " ".join(text.replace("~", " ").replace("{", "").replace("}", "").split())


def bib_authors(value: str) -> list[str]:
    """The names of an author field: split on "and" outside braces ({Barnes and Noble} is
    one), "Last, First" as "First Last", "Last, Jr, First" as "First Last Jr", "others"
    (et al.) dropped."""
    names = []
    for name in _split_outside_braces(value, AND_RE):
        parts = _split_outside_braces(name.strip(), COMMA_RE)
        if len(parts) >= 3:
            parts = [parts[2], parts[0], parts[1], *parts[3:]]
        elif len(parts) == 2:
            parts = [parts[1], parts[0]]
        plain = plain_tex(" ".join(parts))
        if plain and plain.casefold() != "others":
            names.append(plain)
    return names


def _split_outside_braces(text: str, separator: re.Pattern) -> list[str]:
    """`text` cut where `separator` matches outside braces."""
    if "{" not in text:
        return separator.split(text)
    masked, depth = [], 0
    for char in text:
        depth += char == "{"
        masked.append("_" if depth else char)
        depth -= char == "}" and depth > 0
    pieces, start = [], 0
    for match in separator.finditer("".join(masked)):
        pieces.append(text[start : match.start()])
        start = match.end()
    return [*pieces, text[start:]]


def read(source: IO[bytes], layout: Layout, override: FileOverride) -> Iterator[dict]:
    """Records of a BibTeX file, one per entry."""
    return read_bibtex(source, ObjectFields(override.column_map))


READER = Reader(
    family="bibtex",
    formats=("bibtex",),
    read=read,
    extensions=(".bib", ".bibtex"),
    sniff=sniff,
    sniff_order=30,  # after JSON and tables, so that their detection is unchanged
)
