"""Ingest on every input format, with small fixtures written here: exact counts, and for
every file records_seen = accepted + rejected."""

from __future__ import annotations

import gzip
import json

import polars as pl
import pytest

from flows import ingest
from flows.ingest import read as ingest_read
from tests.conftest import SHARED_CORPORA, write

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


def accounted(result: ingest.IngestResult) -> dict[str, tuple[int, int, int]]:
    """(seen, accepted, rejected) per file name, after checking that every record is accounted."""
    out = {}
    for row in result.sources.iter_rows(named=True):
        assert row["records_seen"] == row["accepted"] + row["rejected"], row
        out[row["path"].rsplit("/", 1)[-1]] = (
            row["records_seen"],
            row["accepted"],
            row["rejected"],
        )
    assert result.records.height == result.sources["accepted"].sum()
    assert result.rejects.height == result.sources["rejected"].sum()
    return out


def source(result: ingest.IngestResult, name: str) -> dict:
    return next(r for r in result.sources.iter_rows(named=True) if r["path"].endswith(name))


# --- detection -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "name", "expected"),
    [
        (b"ICLR 2026 Papers\n\nOne abstract.\n\nTwo.\n", "a.txt", ("blocks", "")),
        (b"First abstract.\nSecond abstract.\n", "a.txt", ("lines", "")),
        (b'{"id": 1, "abstract": "x"}\n{"id": 2}\n', "a.txt", ("jsonl", "")),
        (b'{"id": "0704.0001", "abstract": "x", "authors_parsed": []}\n', "a", ("arxiv", "")),
        (b'[\n  {"abstract": "x"},\n  {"abstract": "y"}\n]\n', "a.json", ("json", "")),
        (b"Title,Abstract,Year\nA,B,2020\n", "a.txt", ("csv", ",")),
        (b"\tID\tTitle\tABSTRACT\n0\tp\tt\ta\n", "a.tsv", ("tsv", "\t")),
        (b"PAR1\x15\x04", "a.bin", ("parquet", "")),
    ],
)
def test_format_is_told_by_content(head, name, expected):
    assert ingest.detect_format(head, name) == expected


@pytest.mark.parametrize(
    ("head", "name", "message"),
    [
        (b"", "a.txt", "file is empty"),
        (b"  \n\n", "a.jsonl", "file is empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "a.json", "binary content"),
        (b"\xff\xfeA\x00b\x00", "a.txt", "UTF-16 text"),
    ],
)
def test_unreadable_content_is_an_error(head, name, message):
    with pytest.raises(ingest.IngestError, match=message):
        ingest.detect_format(head, name)


@pytest.mark.parametrize(
    ("head", "name", "expected", "note"),
    [
        (
            b"Just prose, not JSON.\n",
            "a.json",
            ("lines", ""),
            "named .json but the content is lines",
        ),
        (b"name,value\nx,1\n", "a.csv", ("csv", ","), None),
        (b"Plain text.\n", "a.parquet", ("lines", ""), "named .parquet but the content is lines"),
    ],
)
def test_a_name_that_promises_another_format_is_noted_and_the_content_decides(
    head, name, expected, note
):
    found = ingest.detect_format(head, name)
    assert found == expected
    assert ingest.name_mismatch(found[0], name) == (note and f"{note}; read as {found[0]}")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            r"C. Bal\'azs and Erd\H{o}s on {\"u}ber-graphs, Fran\c{c}ois",
            "C. Balázs and Erdős on über-graphs, François",
        ),
        ("next-to-\n  leading order and a\n  hard wrap", "next-to-leading order and a hard wrap"),
        ("n\u2009=\u2009123 at 5\u00a0mg, \u202fthin\u3000wide", "n = 123 at 5 mg, thin wide"),
        ("zero\u200bwidth soft\u00adhyphen \ufeffbom", "zerowidth softhyphen bom"),
        ("<jats:p>First.</jats:p><jats:p>Second &amp; last.</jats:p>", "First. Second & last."),
        ("x<y, a <b> bold</b> and 1 < 2 > 0", "x<y, a bold and 1 < 2 > 0"),
    ],
)
def test_clean_text_for_real_world_input(raw, expected):
    assert pl.DataFrame({"t": [raw]}).select(ingest.clean_text("t")).item() == expected


def test_venue_and_year_from_file_name():
    assert ingest.venue_from_name("ICLR17_submissions.csv") == ("ICLR", 2017)
    assert ingest.venue_from_name("neurips-2024.jsonl.gz") == ("NeurIPS", 2024)
    assert ingest.venue_from_name("NeurIPS2023-OpenReviewData") == ("NeurIPS", 2023)
    assert ingest.venue_from_name("acl-2025-long.jsonl") == ("ACL", 2025)
    assert ingest.venue_from_name("Foo2021_dump.csv") == ("Foo", 2021)
    # Two-digit years only after a known venue: run01/ and v12.csv name nothing.
    assert ingest.venue_from_name("run01") is None
    assert ingest.venue_from_name("v12.csv") is None
    assert ingest.venue_from_name("pubmed_abstracts.csv") is None
    assert ingest.venue_from_name("000_891c899881bf48af.txt") is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('["Deep learning", "Graphs"]', ["Deep learning", "Graphs"]),
        (
            "['Natural language processing', 'Unsupervised Learning']",
            ["Natural language processing", "Unsupervised Learning"],
        ),
        ("vision, robotics ,  RL", ["vision", "robotics", "RL"]),
        ("vision; robotics", ["vision", "robotics"]),
        (["a", " b ", ""], ["a", "b"]),
        ("[]", []),
        ("", []),
        (None, []),
    ],
)
def test_keywords_are_parsed(value, expected):
    assert ingest.parse_list(value) == expected


def test_authors_come_from_authors_parsed_first():
    parsed = [["Balázs", "C.", ""], ["Yuan", "C. -P.", "Jr"]]
    assert ingest.parse_authors(parsed, r"C. Bal\'azs, C.-P. Yuan") == [
        "C. Balázs",
        "C. -P. Yuan Jr",
    ]
    assert ingest.parse_authors(None, "Ada Lovelace and Alan Turing") == [
        "Ada Lovelace",
        "Alan Turing",
    ]
    assert ingest.parse_authors(None, "Lovelace, A.; Turing, A.") == ["Lovelace, A.", "Turing, A."]
    assert ingest.parse_authors(None, [{"name": "Ada"}, "Alan"]) == ["Ada", "Alan"]


# --- CSV and TSV -----------------------------------------------------------------------


def test_multi_line_quoted_csv_fields(tmp_path):
    first_half, second_half = ONE[:60], ONE[61:]
    text = (
        "id,title,abstract,keywords,year,venue\n"
        f'p1,"Sparse attention\n  for long documents","{first_half}\n{second_half}",'
        '"[""attention"", ""memory""]",2024,TMLR\n'
        f"p2,Protein models,\"{TWO}\",\"['proteins', 'contrastive']\",2023,TMLR\n"
        f'p3,Planning agents,"{THREE}","agents, planning",2022,TMLR\n'
    )
    path = write(tmp_path / "export.csv", text)
    result = ingest.ingest([path])
    assert accounted(result) == {"export.csv": (3, 3, 0)}
    records = result.records.sort("record_no")
    data = path.read_bytes()
    assert records["line"].to_list() == [2, 5, 6]  # the first record spans lines 2-4
    assert records["byte_offset"].to_list() == [
        data.index(b"p1,"),
        data.index(b"p2,"),
        data.index(b"p3,"),
    ]
    first = records.row(0, named=True)
    assert first["title"] == "Sparse attention for long documents"
    assert first["abstract"] == ONE
    assert records["keywords"].to_list() == [
        ["attention", "memory"],
        ["proteins", "contrastive"],
        ["agents", "planning"],
    ]
    assert records["external_id"].to_list() == ["p1", "p2", "p3"]
    assert records["year"].to_list() == [2024, 2023, 2022]
    assert records["venue"].to_list() == ["TMLR"] * 3
    assert source(result, "export.csv")["format"] == "csv"


def test_shifted_title_is_repaired_through_the_link_anchor(tmp_path):
    link = "https://openreview.net/forum?id="
    three_with_comma = THREE.replace(" language and", " language, and")
    text = (
        "paper_id,title,abstract,forum\n"
        f'p1,Sparse attention,"{ONE}",{link}p1\n'
        f'p2,Proteins, pockets, and contrast,"{TWO}",{link}p2\n'  # unquoted commas in the title
        # Title and abstract unquoted: the commas inside prose are followed by a space.
        f"p3,Agents, planning,{three_with_comma},{link}p3\n"
        # No space after any comma: the title could end at either one.
        f"p4,Graphs,trees,{ONE.replace('accuracy on', 'accuracy,on')},{link}p4\n"
        "p5,Only a title\n"  # too few fields
    )
    path = write(tmp_path / "forum.csv", text)
    result = ingest.ingest([path])
    assert accounted(result) == {"forum.csv": (5, 3, 2)}
    repaired = result.records.filter(pl.col("external_id") == "p2").row(0, named=True)
    assert repaired["title"] == "Proteins, pockets, and contrast"
    assert repaired["abstract"] == TWO
    assert repaired["flags"] == ["repaired_fields"]
    both = result.records.filter(pl.col("external_id") == "p3").row(0, named=True)
    assert (both["title"], both["abstract"]) == ("Agents, planning", three_with_comma)
    assert result.records.filter(pl.col("external_id") == "p1")["flags"].to_list() == [[]]
    rejects = result.rejects.sort("record_no")
    assert rejects.select("line", "rule").rows() == [
        (5, "wrong_field_count"),
        (6, "wrong_field_count"),
    ]
    assert rejects["reason"].to_list() == [
        "row has 6 fields, the header has 4; "
        "more than one way to rejoin the fields fits the id and link columns",
        "row has 2 fields, the header has 4; too few fields to repair",
    ]
    assert rejects["raw_snippet"].to_list()[1] == "p5,Only a title\n"
    assert source(result, "forum.csv")["rejected_by_rule"] == '{"wrong_field_count": 2}'
    assert source(result, "forum.csv")["flag_counts"] == '{"repaired_fields": 2}'


def test_shifted_title_is_repaired_through_the_id_anchor_only_when_there_is_one(tmp_path):
    anchored = write(
        tmp_path / "with_id.csv", f'id,title,abstract\nq1,Graphs, trees and forests,"{ONE}"\n'
    )
    loose = write(tmp_path / "no_id.csv", f'title,abstract\nGraphs, trees and forests,"{ONE}"\n')
    result = ingest.ingest([anchored, loose])
    assert accounted(result) == {"with_id.csv": (1, 1, 0), "no_id.csv": (1, 0, 1)}
    assert result.records["title"].to_list() == ["Graphs, trees and forests"]
    assert result.rejects["reason"].to_list() == [
        "row has 3 fields, the header has 2; no id or link column to anchor a repair"
    ]


def test_tsv_with_an_unnamed_index_column_and_headers_in_any_case(tmp_path):
    text = (
        "\tPMID\tTitle\tABSTRACT\tJournal\tYear\n"
        f"0\t101\tSparse attention.\t{ONE}\tNature Methods\t2021\n"
        f"1\t102\tProtein models.\t{TWO}\tCell\t2020-05-01\n"
    )
    result = ingest.ingest([write(tmp_path / "pubmed.tsv", text)])
    assert accounted(result) == {"pubmed.tsv": (2, 2, 0)}
    records = result.records.sort("record_no")
    assert records.select("external_id", "title", "venue", "year").rows() == [
        ("101", "Sparse attention", "Nature Methods", 2021),
        ("102", "Protein models", "Cell", 2020),
    ]
    assert source(result, "pubmed.tsv")["format"] == "tsv"


def test_invalid_utf8_bytes_reject_only_their_record(tmp_path):
    csv_bytes = (
        f'id,title,abstract\na1,Good,"{ONE}"\n'.encode()
        + b'a2,Broken,"Bad \xff\xfe bytes '
        + TWO.encode()
        + f'"\na3,Also good,"{THREE}"\n'.encode()
    )
    jsonl_bytes = (
        json.dumps({"title": "Good", "abstract": ONE}).encode()
        + b'\n{"title": "Bad", "abstract": "caf\xe9 '
        + TWO.encode()
        + b'"}\n'
    )
    paths = [write(tmp_path / "bad.csv", csv_bytes), write(tmp_path / "bad.jsonl", jsonl_bytes)]
    result = ingest.ingest(paths)
    assert accounted(result) == {"bad.csv": (3, 2, 1), "bad.jsonl": (2, 1, 1)}
    rejects = result.rejects.sort("source_path")
    row_start = csv_bytes.index(b"a2,")
    second_line = jsonl_bytes.index(b"\n") + 1
    bad_csv_byte, bad_json_byte = csv_bytes.index(b"\xff"), jsonl_bytes.index(b"\xe9")
    assert rejects.select("line", "byte_offset", "rule", "reason").rows() == [
        (3, row_start, "invalid_utf8", f"invalid UTF-8 at byte {bad_csv_byte}"),
        (2, second_line, "invalid_utf8", f"invalid UTF-8 at byte {bad_json_byte}"),
    ]
    assert rejects["raw_snippet"][0].startswith('a2,Broken,"Bad \ufffd\ufffd bytes')


def test_a_row_with_an_empty_title_and_blank_abstract_is_rejected(tmp_path):
    text = f'PID,Decision,Title,Abstract,Keyword\nX1,2,Sparse attention,"{ONE}",[]\nX2,0,,  ,[]\n'
    result = ingest.ingest([write(tmp_path / "ICLR17_submissions.csv", text)])
    assert accounted(result) == {"ICLR17_submissions.csv": (2, 1, 1)}
    assert result.rejects.select("line", "rule", "reason", "raw_snippet").rows() == [
        (3, "empty_abstract", "abstract is empty or whitespace only", "X2,0,,  ,[]\n")
    ]
    kept = result.records.row(0, named=True)
    assert (kept["venue"], kept["year"], kept["decision"], kept["keywords"]) == (
        "ICLR",
        2017,
        "2",
        [],
    )


def test_a_stray_quote_quarantines_its_rows_instead_of_merging_them(tmp_path):
    text = (
        f'id,abstract\na,"{ONE}"\n'
        f'b,"{TWO} oops\n'  # the quote is never closed on this line
        f'c,"{THREE}"\n'
        f'd,"{ONE} again"\n'
    )
    path = write(tmp_path / "stray.csv", text)
    result = ingest.ingest([path])
    assert accounted(result) == {"stray.csv": (3, 2, 1)}
    assert result.records.sort("record_no")["external_id"].to_list() == ["a", "d"]
    reject = result.rejects.row(0, named=True)
    assert (reject["line"], reject["rule"]) == (3, "unparseable_row")
    assert reject["byte_offset"] == text.index("b,")
    assert reject["raw_snippet"].startswith(f'b,"{TWO} oops\nc,"')


def test_a_stray_nul_byte_is_removed_and_counted_not_a_binary_file(tmp_path):
    path = write(tmp_path / "nul.csv", f'id,abstract\na,"{ONE}"\nb,"{TWO}\x00"\n'.encode())
    result = ingest.ingest([path])
    assert accounted(result) == {"nul.csv": (2, 2, 0)}
    assert result.records.sort("record_no")["control_chars_removed"].to_list() == [0, 1]
    assert result.records.sort("record_no")["abstract"].to_list() == [ONE, TWO]


# --- JSON ------------------------------------------------------------------------------


def test_arxiv_snapshot_lines(tmp_path):
    record = {
        "id": "0704.0002",
        "submitter": "Louis Theran",
        "authors": "Ileana Streinu and Louis Theran",
        "title": "Sparsity-certifying Graph\n  Decompositions",
        "comments": None,
        "journal-ref": None,
        "doi": None,
        "categories": "math.CO cs.CG",
        "abstract": "  We describe a new algorithm, the $(k,\\ell)$-pebble game with colors.\n",
        "versions": [{"version": "v1", "created": "Sat, 31 Mar 2007 02:26:18 GMT"}],
        "update_date": "2008-12-13",
        "authors_parsed": [["Streinu", "Ileana", ""], ["Theran", "Louis", ""]],
    }
    other = record | {"id": "0704.0003", "abstract": "  " + ONE.replace(" on ", "\non ", 1)}
    path = write(
        tmp_path / "arxiv-snapshot.json", json.dumps(record) + "\n" + json.dumps(other) + "\n"
    )
    result = ingest.ingest([path])
    assert accounted(result) == {"arxiv-snapshot.json": (2, 2, 0)}
    assert source(result, "arxiv-snapshot.json")["format"] == "arxiv"
    first, second = result.records.sort("record_no").iter_rows(named=True)
    assert first["title"] == "Sparsity-certifying Graph Decompositions"
    assert first["abstract"] == "We describe a new algorithm, the (k,ℓ)-pebble game with colors."
    assert first["authors"] == ["Ileana Streinu", "Louis Theran"]
    assert first["categories"] == ["math.CO", "cs.CG"]
    assert (first["venue"], first["year"], first["external_id"]) == ("arXiv", 2007, "0704.0002")
    # A titled record is a paper however short its abstract; the shortness is flagged.
    assert first["flags"] == ["short_abstract"]
    assert second["abstract"] == ONE and second["flags"] == []
    assert second["byte_offset"] == len(json.dumps(record)) + 1 and second["line"] == 2


def test_json_lines_with_a_broken_line_and_a_non_object(tmp_path):
    lines = [
        json.dumps({"Title": "Sparse attention", "Abstract": ONE, "Keywords": ["a", "b"]}),
        '{"title": "Cut short", "abstract": "',
        "",
        '["not", "a", "record"]',
        json.dumps({"title": "No abstract here", "body": TWO}),
        json.dumps({"paper_id": 7, "summary": THREE, "year": "2019"}),
    ]
    path = write(tmp_path / "dump.jsonl", "\n".join(lines) + "\n")
    result = ingest.ingest([path])
    assert accounted(result) == {"dump.jsonl": (5, 2, 3)}
    assert result.records.sort("record_no").select(
        "line", "external_id", "year", "keywords"
    ).rows() == [
        (1, None, None, ["a", "b"]),
        (6, "7", 2019, []),
    ]
    assert result.rejects.sort("record_no").select("line", "rule").rows() == [
        (2, "invalid_json"),
        (4, "not_a_record"),
        (5, "empty_abstract"),
    ]
    assert result.rejects.sort("record_no")["reason"].to_list()[1:] == [
        "a JSON list where a record (object) belongs",
        "no abstract field among the keys title, body",
    ]


def test_json_array_is_streamed_with_locations(tmp_path):
    items = [
        {"title": "Sparse attention", "abstract": ONE},
        42,
        {"title": "Proteins", "abstract": TWO},
    ]
    text = json.dumps(items, indent=2)
    path = write(tmp_path / "papers.json", text)
    result = ingest.ingest([path])
    assert accounted(result) == {"papers.json": (3, 2, 1)}
    records = result.records.sort("record_no")
    data = path.read_bytes()
    starts = [data.index(b"{"), data.rindex(b"{")]
    assert records["byte_offset"].to_list() == starts
    assert records["line"].to_list() == [data[:s].count(b"\n") + 1 for s in starts]
    assert result.rejects.select("rule", "line").rows() == [("not_a_record", 6)]


def test_json_array_with_a_broken_tail_keeps_what_came_before(tmp_path):
    text = "[" + json.dumps({"abstract": ONE}) + ', {"abstract": "unterminated ' + TWO
    path = write(tmp_path / "cut.json", text)
    result = ingest.ingest([path])
    assert accounted(result) == {"cut.json": (2, 1, 1)}
    reject = result.rejects.row(0, named=True)
    assert reject["rule"] == "invalid_json"
    assert reject["byte_offset"] == text.index('{"abstract": "unterminated')
    assert "the rest of the file could not be split into records" in reject["reason"]


def test_json_array_with_a_broken_object_goes_on_at_the_next_one(tmp_path):
    items = [{"abstract": ONE}, {"abstract": TWO}, {"abstract": THREE}]
    text = json.dumps(items, indent=2).replace('"abstract": "Protein', '"abstract": Protein')
    path = write(tmp_path / "pretty.json", text)
    result = ingest.ingest([path])
    assert accounted(result) == {"pretty.json": (3, 2, 1)}
    assert sorted(result.records["abstract"].to_list()) == sorted([ONE, THREE])
    reject = result.rejects.row(0, named=True)
    assert (reject["rule"], reject["line"]) == ("invalid_json", 5)
    assert reject["byte_offset"] == text.index("{", text.index(ONE))
    assert reject["reason"] == (
        "invalid JSON: Expecting value at line 2 of the record; reading goes on at the next record"
    )


def test_html_entities_and_tags_are_decoded_and_stripped(tmp_path):
    raw = (
        "<p>Accuracy rose above 90&#8201;% with <i>p</i>&nbsp;&lt;&nbsp;0.05 and R<sup>2</sup> "
        "of 0.8 for A &amp; B cohorts; a&lt;b and c&gt;d stay as text.</p><p>We also report "
        "calibration&mdash;across&nbsp;sites&hellip; in twelve hospitals over five years.</p>"
    )
    path = write(
        tmp_path / "html.jsonl",
        json.dumps({"title": "Caf&eacute; &amp; <b>bold</b>", "abstract": raw}),
    )
    result = ingest.ingest([path])
    assert accounted(result) == {"html.jsonl": (1, 1, 0)}
    record = result.records.row(0, named=True)
    assert record["title"] == "Café & bold"
    assert record["abstract"] == (
        "Accuracy rose above 90 % with p < 0.05 and R2 of 0.8 for A & B cohorts; a<b and c>d "
        "stay as text. We also report calibration—across sites… in twelve hospitals over five "
        "years."
    )


def test_control_and_private_use_characters_are_removed_and_counted(tmp_path):
    dirty = ONE.replace("sparse", "sp\x07arse").replace("memory", "mem\ue000ory\u200b")
    path = write(tmp_path / "dirty.jsonl", json.dumps({"title": "T\x0bitle", "abstract": dirty}))
    result = ingest.ingest([path])
    assert accounted(result) == {"dirty.jsonl": (1, 1, 0)}
    record = result.records.row(0, named=True)
    assert (record["title"], record["abstract"]) == ("Title", ONE)
    assert record["control_chars_removed"] == 4
    assert source(result, "dirty.jsonl")["control_chars_removed"] == 4


def test_abstracts_that_look_corrupted_are_flagged_not_rejected(tmp_path):
    no_e = " ".join(w for w in (ONE + " " + TWO + " " + THREE).split() if "e" not in w)
    no_e = (no_e + " ") * 3
    lowercase = (ONE + " " + TWO).lower()
    markup = r"\textbf{\emph{x}} {$\alpha$} <b></b> " * 6 + " ".join(THREE.split()[:22])
    rows = [{"abstract": text} for text in (no_e, lowercase, markup, ONE)]
    path = write(tmp_path / "flags.jsonl", "\n".join(json.dumps(r) for r in rows))
    result = ingest.ingest([path])
    assert accounted(result) == {"flags.jsonl": (4, 4, 0)}
    assert result.records.sort("record_no")["flags"].to_list() == [
        ["missing_letter:e"],
        ["all_lowercase"],
        ["mostly_markup"],
        [],
    ]
    assert json.loads(source(result, "flags.jsonl")["flag_counts"]) == {
        "all_lowercase": 1,
        "missing_letter:e": 1,
        "mostly_markup": 1,
    }


# --- Parquet and gzip ------------------------------------------------------------------


def test_parquet_and_gzip_of_each_format(tmp_path):
    frame = pl.DataFrame(
        {
            "Paper_ID": ["r1", "r2"],
            "title": ["Sparse attention", "Protein models"],
            "abstract": [ONE, TWO],
            "authors": [["Ada Lovelace"], ["Alan Turing", "Grace Hopper"]],
            "keywords": ["attention, memory", None],
            "year": [2024, 2025],
        }
    )
    frame.write_parquet(tmp_path / "raw" / "table.parquet", mkdir=True)
    parquet_gz = gzip.compress((tmp_path / "raw" / "table.parquet").read_bytes())
    write(tmp_path / "raw" / "table.parquet.gz", parquet_gz)
    jsonl = "\n".join(json.dumps({"abstract": t}) for t in (ONE, TWO, THREE)) + "\n"
    write(tmp_path / "raw" / "lines.jsonl.gz", gzip.compress(jsonl.encode()))
    write(tmp_path / "raw" / "rows.csv.gz", gzip.compress(f'id,abstract\nc1,"{THREE}"\n'.encode()))
    write(tmp_path / "raw" / "plain.txt.gz", gzip.compress(f"{ONE}\n{TWO}\n".encode()))
    write(tmp_path / "raw" / "broken.jsonl.gz", b"\x1f\x8b\x08\x00garbage")
    result = ingest.ingest([tmp_path / "raw"])
    assert accounted(result) == {
        "broken.jsonl.gz": (0, 0, 0),
        "lines.jsonl.gz": (3, 3, 0),
        "plain.txt.gz": (2, 2, 0),
        "rows.csv.gz": (1, 1, 0),
        "table.parquet": (2, 2, 0),
        "table.parquet.gz": (2, 2, 0),
    }
    formats = dict(result.sources.select(pl.col("path").str.extract(r"([^/]+)$"), "format").rows())
    assert formats == {
        "broken.jsonl.gz": None,
        "lines.jsonl.gz": "jsonl.gz",
        "plain.txt.gz": "lines.gz",
        "rows.csv.gz": "csv.gz",
        "table.parquet": "parquet",
        "table.parquet.gz": "parquet.gz",
    }
    assert "gzip data that cannot be decompressed" in source(result, "broken.jsonl.gz")["error"]
    table = result.records.filter(pl.col("source_path").str.ends_with("table.parquet")).sort("line")
    assert table.select("line", "external_id", "authors", "keywords", "year").rows() == [
        (1, "r1", ["Ada Lovelace"], ["attention", "memory"], 2024),
        (2, "r2", ["Alan Turing", "Grace Hopper"], [], 2025),
    ]
    # Offsets of gzip files are in the decompressed stream.
    lines = result.records.filter(pl.col("source_path").str.ends_with("lines.jsonl.gz"))
    assert sorted(lines["byte_offset"].to_list()) == [
        0,
        jsonl.index("\n") + 1,
        jsonl.index("\n", jsonl.index("\n") + 1) + 1,
    ]


# --- whole files -----------------------------------------------------------------------


def test_broken_files_are_reported_and_the_run_goes_on(tmp_path):
    raw = tmp_path / "raw"
    write(raw / "image.json", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00")
    write(raw / "empty.csv", b"")
    write(raw / "prose.json", f"{ONE}\n")
    write(raw / "good.jsonl", json.dumps({"abstract": TWO}) + "\n")
    result = ingest.ingest([raw])
    assert accounted(result) == {
        "empty.csv": (0, 0, 0),
        "good.jsonl": (1, 1, 0),
        "image.json": (0, 0, 0),
        "prose.json": (1, 1, 0),
    }
    errors = {
        k: v
        for k, v in result.sources.select(pl.col("path").str.extract(r"([^/]+)$"), "error").rows()
    }
    assert errors["good.jsonl"] is None
    assert "file is empty" in errors["empty.csv"]
    assert "binary content (NUL bytes), not text" in errors["image.json"]
    assert errors["prose.json"] is None
    assert source(result, "prose.json")["warning"].startswith(
        "named .json but the content is lines; read as lines; "
    )


def test_the_same_paper_in_two_files_is_one_paper_with_both_locations(tmp_path):
    csv_path = write(tmp_path / "a.csv", f'id,title,abstract\nx1,Sparse Attention,"{ONE}"\n')
    jsonl_path = write(
        tmp_path / "b.jsonl",
        json.dumps({"title": "sparse  attention", "abstract": ONE.replace(" ", "\n ", 3)})
        + "\n"
        + json.dumps({"title": "Protein models", "abstract": TWO})
        + "\n",
    )
    result = ingest.ingest([csv_path, jsonl_path])
    assert accounted(result) == {"a.csv": (1, 1, 0), "b.jsonl": (2, 2, 0)}
    papers, locations = ingest.build_papers(result.records)
    assert papers.height == 2
    shared = papers.filter(pl.col("n_locations") == 2).row(0, named=True)
    assert (shared["source_path"], shared["title"], shared["external_id"]) == (
        str(csv_path),
        "Sparse Attention",
        "x1",
    )
    where = (
        locations.filter(pl.col("paper_id") == shared["paper_id"])
        .select("source_path", "line")
        .rows()
    )
    assert where == [(str(csv_path), 2), (str(jsonl_path), 1)]


def test_settings_file_overrides_format_venue_year_and_columns(tmp_path):
    raw = tmp_path / "raw"
    write(
        raw / "paperlake.toml",
        '[files."*.dat"]\nformat = "csv"\nvenue = "NeurIPS"\nyear = 2024\n'
        'columns = { abstract = "summary_text", id = "key" }\n\n'
        '[files."notes/*.txt"]\nformat = "lines"\nvenue = "Workshop"\nyear = 2023\n',
    )
    # The record's own venue wins over the settings; its missing year comes from them.
    write(raw / "dump.dat", f'key,summary_text,journal\nk1,"{ONE}",TMLR\n')
    write(raw / "notes" / "talks.txt", f"{TWO}\n\n{THREE}\n")  # blank line: blocks, but says lines
    write(raw / "other.txt", f"{THREE}\n")
    result = ingest.ingest([raw])
    assert accounted(result) == {
        "dump.dat": (1, 1, 0),
        "other.txt": (1, 1, 0),
        "paperlake.toml": (0, 0, 0),
        "talks.txt": (3, 2, 1),
    }
    assert source(result, "paperlake.toml")["format"] == "settings"
    assert source(result, "talks.txt")["format"] == "lines"
    records = result.records.sort("source_path", "record_no")
    assert records.select("external_id", "venue", "year").rows() == [
        ("k1", "TMLR", 2024),
        (None, "Workshop", 2023),
        (None, "Workshop", 2023),
        (None, None, None),
    ]


def test_a_broken_settings_file_is_reported_and_files_are_read_by_their_content(tmp_path):
    raw = tmp_path / "raw"
    write(raw / "paperlake.toml", '[files."*.csv"]\nformat = "xml"\n')
    write(raw / "rows.csv", f'id,abstract\nc1,"{ONE}"\n')
    result = ingest.ingest([raw])
    assert accounted(result) == {"paperlake.toml": (0, 0, 0), "rows.csv": (1, 1, 0)}
    assert "format 'xml' is not one of" in source(result, "paperlake.toml")["error"]


def test_settings_that_contradict_the_content_make_the_file_an_error(tmp_path):
    raw = tmp_path / "raw"
    write(raw / "paperlake.toml", '[files."*.txt"]\nformat = "parquet"\n')
    write(raw / "a.txt", f"{ONE}\n")
    result = ingest.ingest([raw])
    assert (
        "settings say parquet but the content looks like lines" in source(result, "a.txt")["error"]
    )


def test_parses_are_cached_and_redone_when_the_settings_change(tmp_path):
    raw, cache = tmp_path / "raw", tmp_path / "cache"
    write(raw / "rows.csv", f'id,abstract\nc1,"{ONE}"\nc2,"too short"\n')
    write(raw / "README.md", "# What these exports are\n")
    first = ingest.ingest([raw], cache_dir=cache)
    again = ingest.ingest([raw], cache_dir=cache)
    assert {f.path.rsplit("/", 1)[-1]: f.cached for f in again.files} == {
        "rows.csv": True,
        "README.md": False,
    }
    # Parsed for records: the data file the first time, nothing the second (the README is
    # listed, never parsed).
    assert [f.path.rsplit("/", 1)[-1] for f in first.files if f.parsed] == ["rows.csv"]
    assert [f.path for f in again.files if f.parsed] == []
    assert again.records.equals(first.records)
    assert again.rejects.equals(first.rejects)
    assert again.sources.equals(first.sources)
    write(raw / "paperlake.toml", '[files."rows.csv"]\nvenue = "X"\nyear = 2020\n')
    changed = ingest.ingest([raw], cache_dir=cache)
    assert {f.path.rsplit("/", 1)[-1]: f.cached for f in changed.files} == {
        "rows.csv": False,
        "README.md": False,
        "paperlake.toml": False,
    }
    assert [f.path.rsplit("/", 1)[-1] for f in changed.files if f.parsed] == ["rows.csv"]
    assert changed.records["venue"].to_list() == ["X"]


def test_accepted_records_are_spilled_to_parquet_and_read_from_it(tmp_path, monkeypatch):
    monkeypatch.setattr(ingest_read, "BATCH_RECORDS", 2)
    path = write(
        tmp_path / "five.jsonl",
        "\n".join(json.dumps({"abstract": t}) for t in (ONE, TWO, THREE, ONE, TWO)),
    )
    result = ingest.ingest([path])
    assert len(result.parts) == 3 and all(p.exists() for p, _, _ in result.parts)
    records = result.records
    assert records["record_no"].to_list() == [1, 2, 3, 4, 5]
    assert records["source_path"].unique().to_list() == [ingest.shown(path)]
    assert records["abstract"].to_list() == [ONE, TWO, THREE, ONE, TWO]


def test_abstracts_over_max_words_are_rejected(tmp_path):
    path = write(tmp_path / "long.txt", f"{ONE}\n{ONE} {TWO}\n")
    result = ingest.ingest([path], max_words=40)
    assert accounted(result) == {"long.txt": (2, 1, 1)}
    assert result.rejects["rule"].to_list() == ["too_long"]
    assert result.rejects["reason"].to_list() == [
        "abstract has 51 words, more than the maximum of 40"
    ]


def test_every_reject_rule_is_in_the_rejects_suite():
    from flows.core.settings import EXPECTATIONS_DIR

    suite = json.loads((EXPECTATIONS_DIR / "rejects.json").read_text())
    rule_sets = [
        e["kwargs"]["value_set"]
        for e in suite["expectations"]
        if e["kwargs"].get("column") == "rule"
    ]
    assert rule_sets == [list(ingest.REJECT_RULES)]


# --- the shared real corpora, where this checkout has them -----------------------------


def test_shared_corpora():
    if not SHARED_CORPORA.is_dir():
        pytest.skip("no ../shared/corpora beside this checkout")
    results = {d: ingest.ingest([SHARED_CORPORA / d]) for d in ("arxiv", "openreview", "pubmed")}
    counts = {d: accounted(r) for d, r in results.items()}
    assert counts == {
        "arxiv": {"arxiv-metadata-oai-snapshot.json": (200, 200, 0)},
        "openreview": {"ICLR17_submissions.csv": (490, 489, 1)},
        "pubmed": {"pubmed_abstracts.csv": (137, 137, 0)},
    }
    arxiv = results["arxiv"].records
    assert arxiv["authors"].list.len().min() >= 1 and arxiv["categories"].list.len().min() >= 1
    assert arxiv.filter(pl.col("external_id") == "0704.0002")["categories"].to_list() == [
        ["math.CO", "cs.CG"]
    ]
    iclr = results["openreview"]
    assert iclr.rejects.select("rule", "reason").rows() == [
        ("empty_abstract", "abstract is empty or whitespace only")
    ]
    assert iclr.records["keywords"].list.len().min() >= 0
    assert iclr.records.filter(pl.col("external_id") == "SyK00v5xx")["keywords"].to_list() == [
        ["Natural language processing", "Unsupervised Learning"]
    ]
    pubmed = results["pubmed"].records["abstract"]
    for bad in ("<b>", "<i>", "<sup>", "\u2009", "\u00a0"):
        assert not pubmed.str.contains(bad, literal=True).any(), bad
    papers, _ = ingest.build_papers(pl.concat([r.records for r in results.values()]))
    assert papers.height == 826


def test_cached_files_come_back_in_order_each_with_its_own_path(tmp_path):
    """Files of equal content share one cached parse; read back, each file's records carry
    its own path, in the order the files were found, and its rejects come back too."""
    raw, cache = tmp_path / "raw", tmp_path / "cache"
    write(raw / "a.txt", f"{ONE}\n{TWO}\n")
    write(raw / "b.txt", f"{THREE}\ntoo short\n")
    write(raw / "c.txt", f"{ONE}\n{TWO}\n")
    first = ingest.ingest([raw], cache_dir=cache)
    again = ingest.ingest([raw], cache_dir=cache)
    assert [f.cached for f in again.files] == [True, True, True]
    assert len({(part, rows) for part, _, rows in again.parts}) == 2  # a.txt and c.txt share
    assert again.records.equals(first.records) and again.rejects.equals(first.rejects)
    a, b, c = (str(raw / name) for name in ("a.txt", "b.txt", "c.txt"))
    assert again.records.select("source_path", "record_no").rows() == [
        (a, 1),
        (a, 2),
        (b, 1),
        (c, 1),
        (c, 2),
    ]
    assert again.rejects.select("source_path", "rule").rows() == [(b, "too_short")]
