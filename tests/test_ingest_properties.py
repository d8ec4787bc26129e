"""Property tests for ingest: hostile text, values and bytes never crash cleaning or reading.

Each test throws generated material (control characters, quotes, delimiters, lone
brackets, broken links, invalid UTF-8, NUL bytes, long runs) at one function of
flows/ingest/, checks that it does not raise and that what it returns keeps its promise.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable, Iterator
from functools import reduce

import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flows import ingest
from flows.ingest.readers.text import _sniff_text
from tests.conftest import SAMPLE_RAW

PROPS = settings(
    max_examples=200,
    deadline=None,
    database=None,  # no replay from a local database: the @example lines pin known cases
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
# Polars frames cost more per example; one integer (a depth, a digit count) needs fewer.
FRAME_PROPS = settings(PROPS, max_examples=60)
READER_PROPS = settings(PROPS, max_examples=120)
SIZE_PROPS = settings(PROPS, max_examples=40)

LINK_KINDS = {"code", "review", "web", "broken"}
HEX16 = re.compile(r"^[0-9a-f]{16}$")

# --- strategies --------------------------------------------------------------------------

# Text APIs never see lone surrogates: polars and UTF-8 files cannot hold them.
CHARS = st.characters(exclude_categories=("Cs",))
# fmt: off
FRAGMENTS = st.sampled_from(
    [
        '"', "'", '""', ",", ";", "|", "\t", "\n", "\r", "\r\n", "\n\n", "\x00", "\x0b",
        "\x1f", "\x85", "\u2028", "\ufeff", "\u200b", "\u00ad", "\ue000", " ", "  ",
        "[", "]", "{", "}", "(", ")", "[]", "[{", ": 1}", "(1, 2)", "'a', ", "\\", "$",
        "\\textbf{", "\\'{e}", "<b>", "</p>", "&amp;", "&#99999999;", "&#x110000;",
        "http://", "https://", "http://[", "https://[::1", "http://[broken",
        "http://a:99999999", "https://github.com/a/b", "https://openreview.net/forum?id=x",
        "http://ドメイン.テスト/", "http://a\uff03b.com", "http://www.", "www.",
        " and ", "None", "null", "NaN", "nan", "inf", "Infinity", "-1e400", "1e308",
        "0x", "2024", "1799", "2101", "19", "ICLR 2026 Papers", "ICLR17_", "abstract",
    ]
)
# fmt: on
LONG_RUNS = st.builds(
    lambda piece, n: piece * n,
    st.sampled_from(["a", " ", "[", "]", "{", "\\", '"', ",", "\n", "1", "http://a.b/"]),
    st.integers(200, 4000),
)
SHORT_TEXT = st.text(CHARS, max_size=20)
PIECES = st.one_of(SHORT_TEXT, FRAGMENTS)
HOSTILE_TEXT = st.lists(st.one_of(PIECES, PIECES, PIECES, LONG_RUNS), max_size=12).map("".join)
URLISH_TEXT = st.builds(
    lambda scheme, rest: scheme + rest,
    st.sampled_from(["http://", "https://", "http://[", "https://[::1", "http://www."]),
    HOSTILE_TEXT,
)

# Python and JSON list literals, well and badly formed, with unhashable keys among them.
# fmt: off
LITERAL_ATOMS = st.one_of(
    st.sampled_from(
        [
            "1", "-2.5", "1e400", "-1e999", "nan", "None", "null", "True", "'a'", '"b"', "''",
            "b'x'", "1j", "()", "[]", "{}", "set()", "...", "0xff", "'\\x00'", '"\\ud800"',
            "' , '", "[", "]", "'",
        ]
    ),
    PIECES.map(repr),
    PIECES.map(json.dumps),
)
# fmt: on


def _literals(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    items = st.lists(children, max_size=4)
    pairs = st.lists(st.tuples(children, children), max_size=3)
    return st.one_of(
        items.map(lambda xs: "[" + ", ".join(xs) + "]"),
        items.map(lambda xs: "(" + ", ".join(xs) + ",)"),
        items.map(lambda xs: "{" + ", ".join(xs) + "}"),
        pairs.map(lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"),
    )


LITERAL_TEXT = st.recursive(LITERAL_ATOMS, _literals, max_leaves=10)
LIST_TEXT = st.one_of(HOSTILE_TEXT, LITERAL_TEXT, LITERAL_TEXT.map(lambda s: f"[{s}]"))

# Python values a reader can hand over: JSON, Parquet and literal_eval results.
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.decimals(),
    st.dates(),
    st.datetimes(),
    st.binary(max_size=16),
    st.lists(PIECES, max_size=8).map("".join),
    LONG_RUNS,
)
HASHABLE_KEYS = st.one_of(
    SHORT_TEXT, st.integers(), st.none(), st.booleans(), st.tuples(st.integers())
)
VALUES = st.recursive(
    SCALARS,
    lambda c: st.one_of(
        st.lists(c, max_size=4),
        st.lists(c, max_size=4).map(tuple),
        st.dictionaries(HASHABLE_KEYS, c, max_size=4),
    ),
    max_leaves=12,
)
YEAR_VALUES = st.one_of(
    VALUES,
    st.floats(),
    st.sampled_from([float("inf"), float("-inf"), float("nan"), 1e308, -1e308, 1799.99]),
    st.sampled_from([2100.5, 1800.0, True, False, 2**63, -(2**63), "1e308", "Infinity"]),
    st.integers(),
    LIST_TEXT,
)

KNOWN_KEYS = sorted(
    {alias for aliases in ingest.FIELD_ALIASES.values() for alias in aliases}
    | {"authors_parsed", "versions", "update_date", "created", "name", "given", "family"}
    | {"Abstract", "\ufeffid", " Paper-ID ", "TITLE ", "", "url", "forum", "pdf_url"}
)
FIELD_NAMES = sorted(ingest.FIELD_ALIASES)
JSON_KEYS = st.one_of(st.sampled_from(KNOWN_KEYS), SHORT_TEXT)
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), HOSTILE_TEXT),
    lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(JSON_KEYS, c, max_size=4)),
    max_leaves=12,
)
JSON_OBJECTS = st.dictionaries(JSON_KEYS, JSON_VALUES, max_size=8)
ARXIV_EXTRA = st.fixed_dictionaries(
    {},
    optional={
        "authors_parsed": VALUES,
        "versions": VALUES,
        "update_date": VALUES,
        "categories": VALUES,
    },
)


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


# fmt: off
BYTE_FRAGMENTS = st.sampled_from(
    [
        b"\x00", b"\xff", b"\xfe\xff", b"\xff\xfe", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80",
        b"\xef\xbb\xbf", b"\x80", b"\r", b"\n", b"\r\n", b"\n\n", b'"', b'""', b",", b"\t",
        b";", b"|", b"[", b"]", b"{", b"}", b":", b"\\", b"\\u", b"\\ud800", b"NaN",
        b"Infinity", b"1e400", b"\x1f\x8b", b"PAR1", b"abstract", b"id,abstract\n",
    ]
)
# fmt: on
HOSTILE_BYTES = st.lists(
    st.one_of(st.binary(max_size=20), BYTE_FRAGMENTS, HOSTILE_TEXT.map(str.encode)),
    max_size=20,
).map(b"".join)
JSON_LINES_TEXT = st.lists(
    st.one_of(JSON_OBJECTS.map(_dumps), JSON_VALUES.map(_dumps), HOSTILE_TEXT), max_size=6
).map("\n".join)
JSON_ARRAY_TEXT = st.lists(st.one_of(JSON_OBJECTS, JSON_VALUES), max_size=6).map(_dumps)
CELLS = st.one_of(
    HOSTILE_TEXT,
    st.sampled_from(["", "2020", "abc-12", "https://github.com/a/b", '"q,""x"""', '"open']),
)
HEADERS = st.lists(st.one_of(st.sampled_from(KNOWN_KEYS), SHORT_TEXT), min_size=1, max_size=6)


@st.composite
def delimited_text(draw: st.DrawFn) -> str:
    delimiter = draw(st.sampled_from(["\t", ",", ";", "|"]))
    header = draw(HEADERS)
    rows = draw(st.lists(st.lists(CELLS, max_size=len(header) + 2), max_size=6))
    return "\n".join(delimiter.join(line) for line in [header, *rows])


def _spliced(base: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    """Encoded text with hostile bytes dropped in at some place."""

    def splice(text: str, junk: bytes, at: int) -> bytes:
        data = text.encode("utf-8")
        at %= len(data) + 1
        return data[:at] + junk + data[at:]

    return st.builds(splice, base, st.one_of(st.just(b""), HOSTILE_BYTES), st.integers(0, 1 << 20))


READER_BYTES = st.one_of(
    HOSTILE_BYTES,
    _spliced(JSON_LINES_TEXT),
    _spliced(JSON_ARRAY_TEXT),
    _spliced(delimited_text()),
)

FILE_NAMES = st.one_of(
    st.sampled_from(
        ["", "dump.txt", "a.csv", "a.tsv", "a.json", "a.jsonl.gz", "a.parquet", "ICLR17.csv"]
    ),
    HOSTILE_TEXT,
)
OVERRIDES = st.builds(
    ingest.FileOverride,
    format=st.one_of(st.none(), st.sampled_from(ingest.FORMATS)),
    columns=st.lists(
        st.tuples(st.sampled_from(FIELD_NAMES), st.one_of(st.sampled_from(KNOWN_KEYS), SHORT_TEXT)),
        max_size=2,
    ).map(tuple),
)

# Words without whitespace, and whitespace runs to put between them.
WORDS = st.lists(
    st.text(CHARS.filter(lambda c: not c.isspace()), min_size=1, max_size=8), max_size=8
)
WHITESPACE = st.text(
    st.sampled_from(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2000\u2028\u3000"), min_size=1
)


def _nested_list(depth: int) -> object:
    return reduce(lambda inner, _: [inner], range(depth), "x")


def _nested_dict(depth: int) -> object:
    return reduce(lambda inner, _: {"k": inner}, range(depth), "x")


def _spaced(words: list[str], gaps: list[str], ends: tuple[str, str]) -> str:
    """The words joined by the given whitespace runs in turn, with whitespace around them."""
    gaps = gaps or [" "]
    inner = [word + gaps[i % len(gaps)] for i, word in enumerate(words[:-1])]
    return ends[0] + "".join(inner) + "".join(words[-1:]) + ends[1]


# --- names, headers and columns ----------------------------------------------------------


@PROPS
@given(line=HOSTILE_TEXT)
def test_parse_header_gives_a_venue_and_year_or_none(line):
    found = ingest.parse_header(line)
    if found is not None:
        venue, year = found
        assert venue and venue == venue.strip()
        assert 1900 <= year <= 2099
        assert len(line) <= 120


def test_parse_header_is_fast_on_a_long_line():
    """A first line of 20k spaces must not stall format detection (the regex is quadratic)."""
    line = "a" + " " * 20_000 + "x"
    start = time.perf_counter()
    assert ingest.parse_header(line) is None
    assert time.perf_counter() - start < 0.5


@PROPS
@given(name=st.one_of(HOSTILE_TEXT, FILE_NAMES))
def test_venue_from_name_gives_a_venue_and_year_or_none(name):
    found = ingest.venue_from_name(name)
    if found is not None:
        venue, year = found
        assert venue[:1].isascii() and venue[:1].isalpha()
        assert 1900 <= year <= 2099


@PROPS
@given(name=st.one_of(HOSTILE_TEXT, st.sampled_from(KNOWN_KEYS)))
def test_column_key_is_idempotent_and_has_no_spaces(name):
    key = ingest.column_key(name)
    assert ingest.column_key(key) == key
    assert not any(c.isspace() or c == "-" for c in key)


@PROPS
@given(
    names=st.lists(st.one_of(HOSTILE_TEXT, st.sampled_from(KNOWN_KEYS)), max_size=8),
    columns=st.one_of(
        st.none(),
        st.dictionaries(
            st.sampled_from(FIELD_NAMES), st.one_of(st.sampled_from(KNOWN_KEYS), SHORT_TEXT)
        ),
    ),
)
def test_map_columns_points_at_real_columns(names, columns):
    positions = ingest.map_columns(names, columns)
    assert set(positions) <= set(ingest.FIELD_ALIASES)
    assert all(0 <= i < len(names) for i in positions.values())
    if columns is None:
        assert len(set(positions.values())) == len(positions)
        known = {ingest.column_key(n) for n in names} & set(ingest.ALIAS_FIELD)
        assert set(positions) == {ingest.ALIAS_FIELD[k] for k in known}
    anchors = ingest.anchor_columns(names, positions)
    assert all(0 <= i < len(names) for i in anchors)


# --- field values ------------------------------------------------------------------------


@PROPS
@given(value=VALUES)
@example(value={(0,): None})
def test_as_text_and_short_text_give_text(value):
    text = ingest.as_text(value)
    assert (text is None) == (value is None)
    assert text is None or isinstance(text, str)
    short = ingest.short_text(value)
    assert short is None or (isinstance(short, str) and short and short == short.strip())


@PROPS
@given(value=st.one_of(LIST_TEXT, VALUES))
@example(value="[{[]}]")
@example(value="[{(1, 2): 3}]")
def test_parse_list_gives_stripped_items(value):
    items = ingest.parse_list(value)
    assert all(isinstance(s, str) and s and s == s.strip() for s in items)


@PROPS
@given(text=LIST_TEXT, separators=st.sampled_from([r"\s*[;,]\s*", r"[\s,;]+"]))
@example(text="{[]: 1}", separators=r"\s*[;,]\s*")
def test_parse_list_reads_any_literal_text(text, separators):
    """_list_literal (JSON, then ast.literal_eval, then splitting) on bracketed text."""
    items = ingest.parse_list(f"[{text}]", separators)
    assert all(isinstance(s, str) and s and s == s.strip() for s in items)


@PROPS
@given(
    parsed=st.one_of(VALUES, LIST_TEXT),
    authors=st.one_of(VALUES, LIST_TEXT),
)
@example(parsed=None, authors="[{[]}]")
@example(parsed=[[" ", " "]], authors=None)
def test_parse_authors_gives_names(parsed, authors):
    names = ingest.parse_authors(parsed, authors)
    assert all(isinstance(n, str) and n.strip() for n in names)


@PROPS
@given(value=YEAR_VALUES)
@example(value=float("inf"))
@example(value=float("nan"))
@example(value=[[1e308]])
def test_parse_year_gives_a_plausible_year_or_none(value):
    year = ingest.parse_year(value)
    assert year is None or (type(year) is int and 1800 <= year <= 2100)


@PROPS
@given(
    values=st.dictionaries(st.sampled_from(FIELD_NAMES), st.one_of(VALUES, YEAR_VALUES)),
    extra=st.one_of(st.none(), ARXIV_EXTRA, st.dictionaries(JSON_KEYS, VALUES, max_size=4)),
)
@example(values={}, extra={"authors_parsed": None, "versions": True})
@example(values={}, extra={"authors_parsed": None, "versions": {"": None}})
def test_record_fields_gives_raw_columns(values, extra):
    record = ingest.record_fields(values, extra)
    assert set(record) == {
        "external_id", "title_raw", "abstract_raw", "authors", "keywords", "categories",
        "decision", "venue", "year",
    }  # fmt: skip
    assert record["year"] is None or 1800 <= record["year"] <= 2100
    for name in ("external_id", "decision", "venue"):
        assert record[name] is None or (record[name] and record[name] == record[name].strip())
    for name in ("title_raw", "abstract_raw"):
        assert record[name] is None or isinstance(record[name], str)
    for name in ("authors", "keywords", "categories"):
        assert all(isinstance(s, str) and s for s in record[name])


FIELD_FUNCTIONS: dict[str, Callable[[object], object]] = {
    "as_text": ingest.as_text,
    "short_text": ingest.short_text,
    "parse_list": lambda v: ingest.parse_list([v]),
    "parse_authors": lambda v: ingest.parse_authors(None, [v]),
    "parse_authors_parsed": lambda v: ingest.parse_authors([[v, v]], None),
    "parse_year": ingest.parse_year,
    "record_fields": lambda v: ingest.record_fields({f: v for f in FIELD_NAMES}),
}


@pytest.mark.parametrize("function", list(FIELD_FUNCTIONS))
@SIZE_PROPS
@given(digits=st.integers(1, 6000), negative=st.booleans())
def test_field_values_take_huge_integers(function, digits, negative):
    """Integers past CPython's 4300-digit str() limit (a Python hex literal yields them)."""
    FIELD_FUNCTIONS[function]((-1 if negative else 1) * 10**digits)


@SIZE_PROPS
@given(digits=st.integers(1, 6000))
def test_parse_list_takes_huge_hex_literals(digits):
    assert ingest.parse_list(f"[0x{'f' * digits}]")


@pytest.mark.parametrize("function", list(FIELD_FUNCTIONS))
@SIZE_PROPS
@given(depth=st.integers(1, 3000), as_dict=st.booleans())
def test_field_values_take_deep_nesting(function, depth, as_dict):
    """Lists and objects nested about as deep as the JSON decoder allows."""
    FIELD_FUNCTIONS[function](_nested_dict(depth) if as_dict else _nested_list(depth))


@SIZE_PROPS
@given(depth=st.integers(1, 3000))
def test_parse_list_takes_deeply_nested_brackets(depth):
    assert ingest.parse_list("[" * depth + "]" * depth) == []


# --- links and ids -----------------------------------------------------------------------


@PROPS
@given(url=st.one_of(URLISH_TEXT, HOSTILE_TEXT))
def test_classify_link_gives_a_kind(url):
    assert ingest.classify_link(url) in LINK_KINDS


@PROPS
@given(text=st.one_of(st.none(), HOSTILE_TEXT, URLISH_TEXT))
@example(text="see http://[broken, https://[::1 and http://a\uff03b.com")
def test_extract_links_gives_trimmed_links_of_a_kind(text):
    for link in ingest.extract_links(text):
        assert set(link) == {"url", "kind"}
        assert link["kind"] in LINK_KINDS
        assert link["url"].startswith(("http://", "https://"))
        assert link["url"] in text
        assert not link["url"].endswith(tuple(ingest.URL_TRAILING))


@PROPS
@given(title=st.one_of(st.none(), HOSTILE_TEXT), abstract=HOSTILE_TEXT)
def test_content_id_is_16_hex(title, abstract):
    assert HEX16.match(ingest.content_id(title, abstract))


@PROPS
@given(
    title=WORDS,
    abstract=WORDS,
    gaps=st.lists(WHITESPACE, max_size=4),
    ends=st.tuples(st.just("") | WHITESPACE, st.just("") | WHITESPACE),
)
def test_content_id_is_stable_under_whitespace(title, abstract, gaps, ends):
    plain = ingest.content_id(" ".join(title), " ".join(abstract))
    spaced = ingest.content_id(_spaced(title, gaps, ends), _spaced(abstract, gaps[::-1], ends))
    assert spaced == plain


def test_content_id_ignores_where_the_title_ends():
    """Ids hash title and abstract as one normalised text: a record whose title boundary a
    reader placed one word off is the same paper (an id is stable whatever reads it)."""
    assert ingest.content_id("a", "b c") == ingest.content_id("a b", "c")


# --- CSV rows ----------------------------------------------------------------------------


@PROPS
@given(text=HOSTILE_TEXT, delimiter=st.sampled_from(["\t", ",", ";", "|"]))
def test_split_fields_covers_the_text(text, delimiter):
    fields = ingest.split_fields(text, delimiter)
    values = [v for v, _ in fields]
    # Quotes are dropped; every other character is kept, in order.
    assert delimiter.join(values).replace('"', "") == text.replace('"', "")
    if '"' not in text:
        assert values == text.split(delimiter)
        assert not any(quoted for _, quoted in fields)


@st.composite
def shifted_rows(draw: st.DrawFn) -> tuple[str, str, int, dict[int, str]]:
    delimiter = draw(st.sampled_from(["\t", ",", ";", "|"]))
    width = draw(st.integers(1, 6))
    anchors = draw(
        st.dictionaries(
            st.integers(0, width - 1), st.sampled_from(["id", "url", "year"]), max_size=width
        )
    )
    cells = draw(st.lists(CELLS, max_size=width + 3))
    return delimiter.join(cells), delimiter, width, anchors


@PROPS
@given(row=shifted_rows())
def test_repair_row_rejoins_or_explains(row):
    text, delimiter, width, anchors = row
    fixed, problem = ingest.repair_row(text, delimiter, width, anchors)
    if fixed is None:
        assert problem
        return
    assert problem == ""
    assert len(fixed) == width
    assert delimiter.join(fixed) == delimiter.join(
        v for v, _ in ingest.split_fields(text, delimiter)
    )
    assert all(ingest.ANCHOR_SHAPES[kind].match(fixed[i]) for i, kind in anchors.items())


# --- format detection --------------------------------------------------------------------


@PROPS
@given(text=HOSTILE_TEXT)
def test_sniff_text_gives_blocks_or_lines(text):
    assert _sniff_text(text) in ("blocks", "lines")


@PROPS
@given(head=READER_BYTES, name=FILE_NAMES, override=OVERRIDES)
@example(head=b"\r;", name="", override=ingest.NO_OVERRIDE)
@example(head=b'{"a": ' + b"[" * 3000, name="", override=ingest.NO_OVERRIDE)
def test_detect_format_refuses_only_with_ingest_error(head, name, override):
    try:
        fmt, delimiter = ingest.detect_format(head, name, override)
    except ingest.IngestError:
        return
    assert fmt in ingest.FORMATS
    expected = {"csv": {",", ";", "|"}, "tsv": {"\t"}}.get(fmt, {""})
    assert delimiter in expected


# --- readers -----------------------------------------------------------------------------


READERS: dict[str, Callable[[io.BytesIO], Iterator[dict]]] = {
    "blocks": lambda s: ingest.read_text(s, "blocks", False),
    "blocks_header": lambda s: ingest.read_text(s, "blocks", True),
    "lines": lambda s: ingest.read_text(s, "lines", False),
    "jsonl": lambda s: ingest.read_jsonl(s, ingest.ObjectFields()),
    "jsonl_columns": lambda s: ingest.read_jsonl(s, ingest.ObjectFields({"abstract_raw": "x"})),
    "json": lambda s: ingest.read_json_stream(s, ingest.ObjectFields()),
    "csv": lambda s: ingest.read_delimited(s, ",", {}),
    "tsv": lambda s: ingest.read_delimited(s, "\t", {}),
    "semicolon": lambda s: ingest.read_delimited(s, ";", {"abstract_raw": "text"}),
}


def located(data: bytes, records: list[dict]) -> None:
    """Every record is a dict whose line and byte offset point at the same place in `data`."""
    for record in records:
        assert isinstance(record, dict)
        line, offset = record["line"], record["byte_offset"]
        assert type(line) is int and line >= 1
        assert type(offset) is int and 0 <= offset <= len(data)
        assert data[:offset].count(b"\n") + 1 == line


@pytest.mark.parametrize("reader", list(READERS))
@READER_PROPS
@given(data=READER_BYTES)
@example(data=b"\r\x00")
@example(data=b'"')
@example(data=b"[" * 3000 + b"\n")
@example(data=b"[" + b"1" * 5000 + b"]")
def test_readers_yield_located_records(reader, data):
    """Readers never raise, except a CSV reader refusing a header it cannot read at all."""
    records = []
    try:
        records.extend(READERS[reader](io.BytesIO(data)))
    except ingest.IngestError as exc:
        assert reader in ("csv", "tsv", "semicolon") and not records
        assert str(exc).startswith("the header line cannot be read as CSV")
    located(data, records)


@pytest.mark.parametrize("reader", ["jsonl", "json"])
@SIZE_PROPS
@given(depth=st.integers(1, 3000), wrapped=st.booleans())
def test_json_readers_take_deep_nesting(reader, depth, wrapped):
    nested = "[" * depth + "]" * depth
    data = (f'{{"abstract": {nested}}}' if wrapped else nested).encode() + b"\n"
    located(data, list(READERS[reader](io.BytesIO(data))))


@pytest.mark.parametrize("reader", ["jsonl", "json"])
@SIZE_PROPS
@given(digits=st.integers(1, 6000), value=st.sampled_from(["1e400", "NaN", "-Infinity"]))
def test_json_readers_take_extreme_numbers(reader, digits, value):
    """Integers past the 4300-digit limit, and floats that are not finite, as any field."""
    for number in ("1" * digits, value):
        for key in ("year", "abstract", "id", "authors"):
            data = f'{{"abstract": "x", "{key}": {number}}}\n'.encode()
            located(data, list(READERS[reader](io.BytesIO(data))))


@pytest.mark.parametrize("reader", ["jsonl", "json"])
@READER_PROPS
@given(obj=st.builds(lambda base, extra: base | extra, JSON_OBJECTS, ARXIV_EXTRA))
def test_json_readers_take_odd_arxiv_fields(reader, obj):
    """arXiv-looking objects whose versions, authors_parsed or dates have any shape."""
    obj = {"abstract": "x", "authors_parsed": [], **obj}
    data = json.dumps(obj, default=repr, skipkeys=True).encode() + b"\n"
    located(data, list(READERS[reader](io.BytesIO(data))))


# --- cleaning ----------------------------------------------------------------------------

SOURCE = ingest.SourceFile(path="dump", sha256="0" * 64, bytes=0)
WORDY_TEXT = st.lists(
    st.one_of(HOSTILE_TEXT, st.sampled_from(["word", "abstract"])), max_size=12
).map(" ".join)
TEXTS = st.one_of(st.none(), HOSTILE_TEXT, WORDY_TEXT)
RAW_RECORDS = st.fixed_dictionaries(
    {
        "line": st.integers(1, 10**6),
        "byte_offset": st.integers(0, 10**9),
        "abstract_raw": TEXTS,
        "title_raw": TEXTS,
    },
    optional={
        "external_id": TEXTS,
        "venue": TEXTS,
        "decision": TEXTS,
        "year": st.none() | st.integers(-(2**31), 2**31 - 1),
        "authors": st.lists(HOSTILE_TEXT, max_size=3),
        "keywords": st.lists(HOSTILE_TEXT, max_size=3),
        "categories": st.lists(HOSTILE_TEXT, max_size=3),
        "decode_error": HOSTILE_TEXT,
        "read_rule": HOSTILE_TEXT,
        "read_reason": HOSTILE_TEXT,
        "raw_snippet": HOSTILE_TEXT,
        "read_flags": st.lists(HOSTILE_TEXT, max_size=2),
    },
)


CLEANERS = {"normalise": ingest.normalise, "normalise_contained": ingest.normalise_contained}


def batched(records: Iterator[dict]) -> pl.DataFrame:
    frames = list(ingest.record_batches(records, SOURCE))
    return pl.concat(frames) if frames else pl.DataFrame(schema=ingest.RECORD_SCHEMA)


def accounted(batch: pl.DataFrame, clean: str, min_words: int, max_words: int | None) -> None:
    """Every raw record comes out exactly once, accepted or rejected."""
    accepted, rejects = CLEANERS[clean](batch, min_words, max_words)
    assert accepted.height + rejects.height == batch.height
    seen = accepted["record_no"].to_list() + rejects["record_no"].to_list()
    assert sorted(seen) == sorted(batch["record_no"].to_list())
    assert rejects["rule"].null_count() == 0
    assert all(HEX16.match(p) for p in accepted["paper_id"].to_list())


@pytest.mark.parametrize("clean", list(CLEANERS))
@FRAME_PROPS
@given(
    records=st.lists(RAW_RECORDS, max_size=6),
    min_words=st.integers(0, 5),
    max_words=st.one_of(st.none(), st.integers(1, 50)),
)
@example(
    records=[{"line": 1, "byte_offset": 0, "abstract_raw": "a b c http://[x", "title_raw": None}],
    min_words=0,
    max_words=None,
)
def test_normalise_accepts_or_rejects_every_record(clean, records, min_words, max_words):
    batch = batched(iter(records))
    assert batch.height == len(records)
    accounted(batch, clean, min_words, max_words)


@pytest.mark.parametrize("reader", ["blocks", "lines", "jsonl", "json", "csv"])
@FRAME_PROPS
@given(data=READER_BYTES, min_words=st.integers(0, 5))
def test_read_then_normalise_accounts_for_every_record(reader, data, min_words):
    """As ingest_file does it: a reader failing at once fails the file (FILE_ERRORS)."""
    try:
        batch = batched(READERS[reader](io.BytesIO(data)))
    except ingest.FILE_ERRORS:
        return
    accounted(batch, "normalise_contained", min_words, None)


# --- mutated real files ---------------------------------------------------------------------

SAMPLE_FILE = ingest.discover([SAMPLE_RAW])[0]
MUTATIONS = st.lists(
    st.tuples(
        st.sampled_from(["flip", "cut", "insert", "delete"]),
        st.floats(0, 1, exclude_max=True),
        st.binary(min_size=1, max_size=40),
    ),
    min_size=1,
    max_size=6,
)


def mutate(data: bytes, edits: list[tuple[str, float, bytes]]) -> bytes:
    """`data` after byte flips, cuts, insertions and deletions at relative places."""
    for kind, where, payload in edits:
        at = int(where * len(data)) if data else 0
        if kind == "flip" and data:
            data = data[:at] + bytes([data[at] ^ payload[0]]) + data[at + 1 :]
        elif kind == "cut":
            data = data[:at]
        elif kind == "insert":
            data = data[:at] + payload + data[at:]
        else:
            data = data[:at] + data[at + len(payload) :]
    return data


@FRAME_PROPS
@given(
    edits=MUTATIONS,
    name=st.sampled_from(["dump.txt", "dump.jsonl", "dump.csv", "dump.txt.gz", "dump.json"]),
)
def test_a_mutated_real_file_never_escapes_and_every_record_is_accounted(
    tmp_path_factory, edits, name
):
    """The sample dump (as itself, as JSON Lines, CSV, gzip and a JSON array), mutated:
    ingest raises nothing, and each file is an error with no records or has seen =
    accepted + rejected, with every reject in rejects."""
    import gzip as gz

    text = SAMPLE_FILE.read_text(encoding="utf-8")
    blocks = [b for b in text.split("\n\n")[1:] if b.strip()]
    rows = [{"title": f"Paper {i}", "abstract": b, "year": 2026} for i, b in enumerate(blocks)]
    as_bytes = {
        "dump.txt": text.encode(),
        "dump.jsonl": "".join(json.dumps(r) + "\n" for r in rows).encode(),
        "dump.csv": pl.DataFrame(rows).write_csv().encode(),
        "dump.txt.gz": gz.compress(text.encode()),
        "dump.json": json.dumps(rows).encode(),
    }
    folder = tmp_path_factory.mktemp("mutated")
    (folder / name).write_bytes(mutate(as_bytes[name], edits))
    result = ingest.ingest([folder], min_words=5)
    (source,) = result.sources.iter_rows(named=True)
    assert source["records_seen"] == source["accepted"] + source["rejected"]
    assert source["error"] is None or source["records_seen"] == 0
    assert result.rejects.height == source["rejected"]
    assert result.records.height == source["accepted"]
