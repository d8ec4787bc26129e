"""Field values: which column or key holds which record field, and each value read as
text, list, authors or year, whatever shape a raw file gives it."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from flows.ingest.model import SNIPPET_CHARS

# Lists nested deeper than this in a field value are not read further.
MAX_VALUE_DEPTH = 20
YEAR_RE = re.compile(r"(?<!\d)(1[89]\d{2}|20\d{2})(?!\d)")
# Column or key names that mean a record field, compared case-insensitively.
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "external_id": ("id", "pid", "paper_id", "pmid", "paperid", "arxiv_id", "uid"),
    "title_raw": ("title", "paper_title"),
    "abstract_raw": ("abstract", "summary", "abstract_text", "paper_abstract"),
    "authors": ("authors", "author", "author_names"),
    "keywords": ("keywords", "keyword", "tags"),
    "year": ("year", "pub_year", "publication_year"),
    "venue": ("venue", "journal", "conference", "booktitle"),
    "decision": ("decision", "status"),
    "categories": ("categories", "category"),
}
ALIAS_FIELD = {alias: name for name, aliases in FIELD_ALIASES.items() for alias in aliases}


def column_key(name: str) -> str:
    """A column or key name compared case-insensitively: "Paper ID" is paper_id."""
    return re.sub(r"[\s\-]+", "_", str(name).strip().lstrip("\ufeff").casefold())


def map_columns(names: Sequence[str], columns: Mapping[str, str] | None = None) -> dict[str, int]:
    """Which position holds which record field: settings first, then known names.

    An unnamed column (a pandas index) or an unknown one is ignored.
    """
    keys = [column_key(n) for n in names]
    out: dict[str, int] = {}
    for target, name in (columns or {}).items():
        key = column_key(name)
        if key in keys:
            out[target] = keys.index(key)
    taken = set(out.values())
    for i, key in enumerate(keys):
        target = ALIAS_FIELD.get(key)
        if target and target not in out and i not in taken:
            out[target] = i
            taken.add(i)
    return out


def as_text(value: Any, depth: int = 0) -> str | None:
    """A field value as text: numbers without a trailing .0, lists one item per line,
    binary decoded as UTF-8.

    Whatever the value (nested past any sense, an integer of thousands of digits, a dict
    with tuple keys), the answer is text or None, never an exception.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        # A binary column (Parquet) holding text: UTF-8, any bad byte as U+FFFD.
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (list, tuple)):
        if depth >= MAX_VALUE_DEPTH:
            return None
        return "\n".join(t for t in (as_text(v, depth + 1) for v in value) if t is not None)
    try:
        if isinstance(value, dict):
            return json.dumps(value, ensure_ascii=False, default=str)
        return str(value)
    except (TypeError, ValueError, RecursionError):  # odd keys, deep nesting, huge integers
        return f"<{type(value).__name__} that cannot be shown as text>"


def short_text(value: Any) -> str | None:
    """A short field (id, venue, decision): stripped, None when blank."""
    text = as_text(value)
    text = text.strip() if text is not None else None
    return text or None


def parse_list(value: Any, separators: str = r"\s*[;,]\s*") -> list[str]:
    """A list from a JSON list, a Python list literal or a separated string."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        items: Iterable = value
    else:
        text = as_text(value).strip()
        if not text:
            return []
        if text[0] == "[" and text[-1] == "]":
            items = _list_literal(text)
        else:
            items = re.split(separators, text)
    return [s for s in (short_text(i) for i in items) if s]


def _list_literal(text: str) -> list:
    """Items of "["a", "b"]" (JSON) or "['a', 'b']" (Python); else split the inside on commas.

    Brackets nested too deep to parse hold no items.
    """
    try:
        items = json.loads(text, parse_int=parse_json_int)
    except RecursionError:
        return []
    except ValueError:
        try:
            # Literals only: ast.literal_eval evaluates no code.
            items = ast.literal_eval(text) if len(text) < 100_000 else None
        except RecursionError:
            return []
        except (ValueError, TypeError, SyntaxError, MemoryError):
            items = None
    if isinstance(items, (list, tuple)):
        return list(items)
    return [s.strip(" '\"") for s in text[1:-1].split(",")]


def parse_authors(parsed: Any, authors: Any) -> list[str]:
    """Author names, from arXiv's authors_parsed ([last, first, suffix]) where there is one."""
    if isinstance(parsed, (list, tuple)) and parsed:
        names = []
        for item in parsed:
            if isinstance(item, (list, tuple)):
                last, first, suffix = (list(item) + ["", "", ""])[:3]
                parts = (short_text(p) for p in (first, last, suffix))
                names.append(" ".join(p for p in parts if p))
            elif text := short_text(item):
                names.append(text)
        return [n for n in names if n]
    if isinstance(authors, (list, tuple)):
        out = []
        for item in authors:
            if isinstance(item, dict):
                item = item.get("name") or " ".join(
                    str(item[k]) for k in ("given", "first", "family", "last") if item.get(k)
                )
            if text := short_text(item):
                out.append(text)
        return out
    text = short_text(authors)
    if not text:
        return []
    if text.startswith("[") and text.endswith("]"):
        return parse_list(text)
    separator = r"\s*;\s*" if ";" in text else r"\s*,\s*(?:and\s+)?|\s+and\s+"
    return [s for s in (p.strip() for p in re.split(separator, text)) if s]


def parse_year(value: Any) -> int | None:
    """A year from a number, a date or any text holding a four-digit year."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if 1800 <= value <= 2100 else None
    match = YEAR_RE.search(as_text(value) or "")
    return int(match.group(1)) if match else None


class ObjectFields:
    """Record fields from JSON objects or Parquet rows, whatever their keys are called."""

    def __init__(self, columns: Mapping[str, str] | None = None):
        self.columns = dict(columns or {})
        self._keys: dict[tuple, dict[str, str]] = {}

    def keys_for(self, obj: Mapping) -> dict[str, str]:
        """record field -> key of the object, worked out once per set of keys."""
        shape = tuple(obj)
        if shape not in self._keys:
            names = list(obj)
            self._keys[shape] = {f: names[i] for f, i in map_columns(names, self.columns).items()}
        return self._keys[shape]

    def fill(self, record: dict, obj: Any, raw: str | None) -> dict:
        """Put an object's fields into `record`; a non-object or no abstract is a reject."""
        if raw is not None:
            record["raw_snippet"] = raw[:SNIPPET_CHARS]
        if not isinstance(obj, dict):
            record["read_rule"] = "not_a_record"
            record["read_reason"] = f"a JSON {type(obj).__name__} where a record (object) belongs"
            return record
        keys = self.keys_for(obj)
        if "abstract_raw" not in keys:
            record["read_rule"] = "empty_abstract"
            record["read_reason"] = "no abstract field among the keys " + ", ".join(
                str(k) for k in list(obj)[:20]
            )
            return record
        values = {f: obj.get(k) for f, k in keys.items()}
        return fill_fields(record, values, obj, keys.get("external_id"))


def fill_fields(
    record: dict,
    values: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
    id_field: str | None = None,
) -> dict:
    """`record` with the fields of `values`; a value that cannot be read makes the record a
    `bad_value` reject carrying the exception, and the file goes on.

    Args:
        id_field: the column or key the id was read from, kept with an id: it says which
            scheme the id is of (a `pmid` column holds PubMed ids).
    """
    try:
        record.update(record_fields(values, extra))
        if record["external_id"] is not None and id_field is not None:
            record["id_field"] = str(id_field).strip().lstrip("\ufeff")
    except Exception as exc:  # noqa: BLE001 - one record's values, reported on that record
        record["read_rule"] = "bad_value"
        record["read_reason"] = f"a field value could not be read: {type(exc).__name__}: {exc}"
    return record


def record_fields(values: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> dict:
    """Raw record columns from field values; `extra` holds arXiv's authors_parsed and dates."""
    extra = extra or {}
    year = parse_year(values.get("year"))
    venue = short_text(values.get("venue"))
    if is_arxiv(extra):
        versions = extra.get("versions")
        first = (
            versions[0].get("created")
            if isinstance(versions, list) and versions and isinstance(versions[0], dict)
            else None
        )
        year = year or parse_year(first) or parse_year(extra.get("update_date"))
        venue = venue or "arXiv"
    return {
        "external_id": short_text(values.get("external_id")),
        "title_raw": as_text(values.get("title_raw")),
        "abstract_raw": as_text(values.get("abstract_raw")),
        "authors": parse_authors(extra.get("authors_parsed"), values.get("authors")),
        "keywords": parse_list(values.get("keywords")),
        "categories": parse_list(values.get("categories"), r"[\s,;]+"),
        "decision": short_text(values.get("decision")),
        "venue": venue,
        "year": year,
    }


def is_arxiv(obj: Mapping) -> bool:
    return "authors_parsed" in obj or {"categories", "versions", "update_date"} <= obj.keys()


def parse_json_int(text: str) -> int | float:
    """A JSON integer; one too long for Python's int conversion becomes a float (inf)."""
    return int(text) if len(text) < 4000 else float(text)
