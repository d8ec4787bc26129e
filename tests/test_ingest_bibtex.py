"""BibTeX files: one record per entry, located by its `@`; broken entries cost themselves."""

from __future__ import annotations

import gzip
import io

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flows import ingest
from flows.ingest.readers.bibtex import bib_authors, plain_tex, read_bibtex
from tests.conftest import write

ONE = (
    "We propose a sparse attention scheme for long documents that keeps accuracy on "
    "question answering while cutting memory by a factor of four on every benchmark we tried."
)
TWO = (
    "Protein language models are fine-tuned with a contrastive objective and predict "
    "binding affinity better than docking baselines on three public datasets of complexes."
)
THREE = (
    "A planning agent writes its own subgoals in natural language and revises them after "
    "each failure, which doubles the success rate on long-horizon household tasks."
)
REFS = (
    r"""% Exported by hand
@string{neurips = "Advances in Neural Information Processing Systems"}

@inproceedings{lovelace2024sparse,
  title = {Sparse {Attention} for \textbf{Long} Documents},
  author = {Lovelace, Ada and Turing, Alan M. and {Barnes and Noble}},
  booktitle = neurips # " 37",
  year = {2024},
  abstract = {<ONE>},
  url = {https://openreview.net/forum?id=abc},
}
@article{noabstract, title = {Nothing to read}, journal = {J. Irrelevance}, year = 2023}
@article{broken,
  title = {Unbalanced {braces},
  abstract = {<TWO>},

@Article(paren2022, title = "Quoted {Title} here", author = "Bal{\'a}zs, C. and others",
  journal = {Journal of {M}achine Learning}, year = "2022", abstract = "<TWO>")
@comment{not a {record}}
@misc{early, title = {A}}, abstract = {<THREE>}
}
@misc{untitled, abstract = {}}
@misc{tail, abstract = {<THREE>}}
""".replace("<ONE>", ONE)
    .replace("<TWO>", TWO)
    .replace("<THREE>", THREE)
)


def at_signs(data: bytes, offsets: list[int]) -> None:
    """Every offset points at an entry's `@`."""
    assert all(data[offset : offset + 1] == b"@" for offset in offsets), offsets


def test_each_entry_is_one_record_located_by_its_at_sign(tmp_path):
    path = write(tmp_path / "refs.bib", REFS)
    result = ingest.ingest([path])
    (source,) = result.sources.iter_rows(named=True)
    assert (source["format"], source["records_seen"], source["accepted"]) == ("bibtex", 7, 3)
    assert source["rejected_by_rule"] == '{"empty_abstract": 2, "unparseable_row": 2}'
    records = result.records.sort("record_no")
    assert records.select("record_no", "line", "byte_offset", "external_id").rows() == [
        (1, 4, 91, "lovelace2024sparse"),
        (4, 17, 859, "paren2022"),
        (7, 23, 1448, "tail"),
    ]
    first, second, third = records.iter_rows(named=True)
    assert first["title"] == "Sparse Attention for Long Documents"
    assert first["authors"] == ["Ada Lovelace", "Alan M. Turing", "Barnes and Noble"]
    assert (first["venue"], first["year"], first["abstract"]) == (
        "Advances in Neural Information Processing Systems 37",
        2024,
        ONE,
    )
    assert second["title"] == "Quoted Title here"
    assert second["authors"] == ["C. Balázs"]
    assert (second["venue"], second["year"], second["abstract"]) == (
        "Journal of Machine Learning",
        2022,
        TWO,
    )
    assert (third["title"], third["venue"], third["abstract"]) == (None, None, THREE)
    at_signs(REFS.encode(), records["byte_offset"].to_list())


def test_broken_entries_are_rejected_and_reading_goes_on(tmp_path):
    result = ingest.ingest([write(tmp_path / "refs.bib", REFS)])
    rejects = result.rejects.sort("record_no")
    assert rejects.select("record_no", "line", "byte_offset", "rule", "reason").rows() == [
        (2, 12, 538, "empty_abstract", "no abstract field among the keys id, title, journal, year"),
        (
            3,
            13,
            627,
            "unparseable_row",
            "BibTeX entry's braces do not balance: 2 left open; reading goes on at the next "
            "line starting with @",
        ),
        (
            5,
            20,
            1213,
            "unparseable_row",
            "BibTeX entry's braces do not balance: it closed early, and a stray } follows at "
            "line 20",
        ),
        (6, 22, 1417, "empty_abstract", "abstract is empty or whitespace only"),
    ]
    assert rejects["raw_snippet"].to_list()[2] == "@misc{early, title = {A}}"
    at_signs(REFS.encode(), rejects["byte_offset"].to_list())


def test_invalid_utf8_costs_its_entry(tmp_path):
    data = (
        b"@misc{good, abstract = {" + ONE.encode() + b"}}\n"
        b"@misc{bad, abstract = {caf\xe9 " + TWO.encode() + b"}}\n"
    )
    result = ingest.ingest([write(tmp_path / "refs.bib", data)])
    assert result.records["external_id"].to_list() == ["good"]
    reject = result.rejects.row(0, named=True)
    assert (reject["rule"], reject["line"], reject["byte_offset"]) == ("invalid_utf8", 2, 194)
    assert reject["reason"] == "invalid UTF-8 at byte 220"
    assert data[220:221] == b"\xe9"


def test_gzip_and_settings_columns(tmp_path):
    raw = tmp_path / "raw"
    text = "@article{k1, journal = {JMLR}, summary_text = {" + ONE + "}}\n"
    write(raw / "refs.bib.gz", gzip.compress(text.encode()))
    write(
        raw / "paperlake.toml",
        '[files."refs.bib.gz"]\nformat = "bibtex"\nyear = 2021\n'
        'columns = { abstract = "Summary_Text" }\n',
    )
    result = ingest.ingest([raw])
    record = result.records.row(0, named=True)
    assert (record["external_id"], record["venue"], record["year"]) == ("k1", "JMLR", 2021)
    assert record["abstract"] == ONE
    assert result.sources["format"].to_list() == ["bibtex.gz", "settings"]


def test_macros_concatenate_and_a_repeated_field_keeps_its_first_value(tmp_path):
    text = (
        '@string{ieee = "IEEE"}\n'
        '@string{tpami = ieee # " Transactions on Pattern Analysis"}\n'
        "@article{k, title = {First}, title = {Second}, journal = tpami,\n"
        f'  abstract = "{ONE[:40]}" # {{{ONE[40:80]}}} # "{ONE[80:]}"}}\n'
    )
    record = ingest.ingest([write(tmp_path / "refs.bib", text)]).records.row(0, named=True)
    assert (record["title"], record["venue"], record["abstract"]) == (
        "First",
        "IEEE Transactions on Pattern Analysis",
        ONE,
    )


def test_crlf_lines_and_latin1_bytes_keep_their_places(tmp_path):
    data = (
        b"@misc{a,\r\n  abstract = {" + ONE.encode() + b"}\r\n}\r\n\r\n"
        b"@misc{b, title = {Caf\xe9}, abstract = {" + TWO.encode() + b"}}\r\n"
        b"@misc{c, abstract = {" + THREE.encode() + b"}}\r\n"
    )
    result = ingest.ingest([write(tmp_path / "refs.bib", data)])
    records = result.records.sort("record_no")
    assert records.select("external_id", "line", "byte_offset").rows() == [
        ("a", 1, 0),
        ("c", 6, data.index(b"@misc{c")),
    ]
    reject = result.rejects.row(0, named=True)
    assert (reject["rule"], reject["line"], reject["byte_offset"]) == (
        "invalid_utf8",
        5,
        data.index(b"@misc{b"),
    )
    assert reject["reason"] == "invalid UTF-8 at byte " + str(data.index(b"\xe9"))


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (
            '@misc(k, title = "}", abstract = {x})',
            "BibTeX entry's braces do not balance: a } closes none",
        ),
        (
            '@misc{k, title = "With \\"{U}mlauts", abstract = {x}}',
            "BibTeX entry cannot be read: no comma after the title field",
        ),
    ],
)
def test_quoted_values_follow_bibtex(entry, reason):
    """Braces balance inside quotes too, and a backslash does not hide a quote."""
    (record,) = read_bibtex(io.BytesIO(entry.encode()), ingest.ObjectFields())
    assert record["read_rule"] == "unparseable_row"
    assert record["read_reason"].startswith(reason)


@pytest.mark.parametrize(
    ("head", "name", "expected"),
    [
        (b"@article{k,\n  title = {T},\n}\n", "refs.bib", ("bibtex", "")),
        (b"% Encoding: UTF-8\n\n@Comment{x}\n@misc{k}\n", "", ("bibtex", "")),
        (b"\xef\xbb\xbf  @inproceedings (k, title = {T})\n", "a.txt", ("bibtex", "")),
        (b"Email us @ the address below.\n@misc{k}\n", "refs.bib", ("lines", "")),
        (b"@article{k,\n", "refs.csv", ("csv", ",")),
    ],
)
def test_detects_bibtex_by_content(head, name, expected):
    assert ingest.detect_format(head, name) == expected


def test_a_bib_file_of_prose_is_read_as_lines_with_a_warning(tmp_path):
    result = ingest.ingest([write(tmp_path / "notes.bib", f"{ONE}\n{TWO}\n")])
    (source,) = result.sources.iter_rows(named=True)
    assert (source["format"], source["accepted"]) == ("lines", 2)
    assert source["warning"].startswith("named .bib but the content is lines; read as lines")


def test_settings_claiming_bibtex_for_json_are_refused(tmp_path):
    raw = tmp_path / "raw"
    write(raw / "refs.json", '{"abstract": "x"}\n')
    write(raw / "paperlake.toml", '[files."refs.json"]\nformat = "bibtex"\n')
    (source, _) = ingest.ingest([raw]).sources.iter_rows(named=True)
    assert source["error"].endswith("settings say bibtex but the content looks like jsonl")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Ada Lovelace and Alan Turing", ["Ada Lovelace", "Alan Turing"]),
        ("Lovelace, Ada AND Turing, A.~M.", ["Ada Lovelace", "A. M. Turing"]),
        ("King, Jr, Martin Luther and others", ["Martin Luther King Jr"]),
        (r"{\"O}zt{\"u}rk, Ay{\c s}e", ["Ayşe Öztürk"]),
        ("{Barnes and Noble} and {Google, Inc.}", ["Barnes and Noble", "Google, Inc."]),
        ("", []),
    ],
)
def test_bib_authors(value, expected):
    assert bib_authors(value) == expected


def test_plain_tex():
    assert (
        plain_tex(r"Proc.\ of {ACM} SIGKDD \& {\'E}cole~Normale  ")
        == "Proc.\\ of ACM SIGKDD & École Normale"
    )


# --- properties --------------------------------------------------------------------------

PROPS = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# fmt: off
FRAGMENTS = st.sampled_from(
    [
        b"@", b"@article{", b"@misc(", b"@string{m = {M}}", b"@comment{", b"@preamble{",
        b"{", b"}", b"(", b")", b'"', b"#", b"=", b",", b" and ", b"key,", b"abstract = {",
        b"title = \"", b"author = {A, B and C}", b"year = 2024", b"m", b"\n", b"\r\n", b"\n@",
        b"%", b"\\'{e}", b"\\", b"~", b"\x00", b"\xff", b"\xe2\x82", b"\xef\xbb\xbf",
    ]
)
# fmt: on
BIB_BYTES = st.lists(st.one_of(FRAGMENTS, FRAGMENTS, st.binary(max_size=12)), max_size=40).map(
    b"".join
)


@PROPS
@given(data=st.one_of(BIB_BYTES, st.binary(max_size=200)))
@example(data=b"@a{" + b"{" * 5000 + b"\n@b{k, abstract = {x}}")
@example(data=b'@a(k, t = "}", abstract = {x})\n')
@example(data=b"@string{m = {x} # }\n@a{k, abstract = m # m}")
def test_the_reader_never_raises_and_locates_every_record(data):
    records = list(read_bibtex(io.BytesIO(data), ingest.ObjectFields()))
    for record in records:
        line, offset = record["line"], record["byte_offset"]
        assert data[offset : offset + 1] == b"@"
        assert data[:offset].count(b"\n") + 1 == line
        assert record.get("read_rule") in (None, "empty_abstract", "unparseable_row", "bad_value")
