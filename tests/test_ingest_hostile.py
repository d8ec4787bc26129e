"""Exports no one here wrote: one bad value costs one record, missing metadata costs no file,
and shifted CSV rows are rejoined only where one reading fits."""

from __future__ import annotations

import gzip
import json
import re
import tomllib

import polars as pl

from flows import ingest
from flows.ingest import clean as ingest_clean
from tests.conftest import write
from tests.hostile import (
    OPENREVIEW_HEADER,
    naive_csv,
    openreview_rows,
    proper_csv,
    sample_abstracts,
    write_all,
)


def by_name(result: ingest.IngestResult) -> dict[str, dict]:
    rows = {}
    for row in result.sources.iter_rows(named=True):
        assert row["records_seen"] == row["accepted"] + row["rejected"], row
        rows[row["path"].rsplit("/", 1)[-1]] = row
    return rows


def test_a_malformed_link_costs_nothing_but_its_own_link(tmp_path):
    rows = openreview_rows(2000, seed=3)
    rows.append(dict(rows[0], id="bad", abstract=rows[0]["abstract"] + " See http://[broken now."))
    path = write(tmp_path / "links.csv", proper_csv(rows, OPENREVIEW_HEADER))
    result = ingest.ingest([path])
    source = by_name(result)["links.csv"]
    assert (source["records_seen"], source["accepted"], source["error"]) == (2001, 2001, None)
    bad = result.records.filter(pl.col("external_id") == "bad").row(0, named=True)
    assert {"url": "http://[broken", "kind": "broken"} in bad["links"]


def test_a_record_whose_cleaning_fails_is_rejected_with_the_exception(tmp_path, monkeypatch):
    extract = ingest.extract_links

    def fragile(text):
        if "Record 1," in (text or ""):
            raise RuntimeError("cannot classify this link")
        return extract(text)

    monkeypatch.setattr(ingest_clean, "extract_links", fragile)
    path = write(tmp_path / "rows.csv", proper_csv(openreview_rows(3), OPENREVIEW_HEADER))
    result = ingest.ingest([path])
    assert by_name(result)["rows.csv"]["accepted"] == 2
    reject = result.rejects.row(0, named=True)
    assert (reject["rule"], reject["line"], reject["record_no"]) == ("cleaning_error", 3, 2)
    assert "RuntimeError: cannot classify this link" in reject["reason"]
    assert reject["raw_snippet"].startswith("or00001,")


def test_a_value_that_does_not_fit_its_column_costs_its_record():
    source = ingest.SourceFile(path="x.jsonl", sha256="0" * 64, bytes=1)
    records = [
        {"line": 1, "byte_offset": 0, "abstract_raw": "fine " * 30},
        {"line": 2, "byte_offset": 151, "abstract_raw": "odd " * 30, "year": "MMXXIV"},
    ]
    (frame,) = ingest.record_batches(iter(records), source)
    assert frame["abstract_raw"].to_list()[0] == "fine " * 30
    bad = frame.row(1, named=True)
    assert (bad["read_rule"], bad["line"], bad["record_no"]) == ("bad_value", 2, 2)
    assert bad["read_reason"].startswith("a value does not fit its column: ")


def test_a_truncated_gzip_keeps_the_records_before_the_break(tmp_path):
    text = "".join(json.dumps(r) + "\n" for r in openreview_rows(300, seed=9))
    path = write(tmp_path / "cut.jsonl.gz", gzip.compress(text.encode())[:-2000])
    result = ingest.ingest([path])
    source = by_name(result)["cut.jsonl.gz"]
    assert source["error"] is None
    assert 250 < source["accepted"] < 300
    assert json.loads(source["rejected_by_rule"]) == {"unreadable_rest": 1}
    reject = result.rejects.row(0, named=True)
    assert reject["line"] == source["accepted"] + 1
    assert re.match(r"the file could not be read after line \d+: EOFError", reject["reason"])
    assert "reading stopped early" in source["warning"]


def test_missing_venues_come_from_folders_or_are_warned_about_with_the_fix(tmp_path):
    raw = tmp_path / "exports"
    abstracts = sample_abstracts()
    write(
        raw / "NeurIPS2023-OpenReviewData" / "oral.csv",
        proper_csv(openreview_rows(5), OPENREVIEW_HEADER),
    )
    write(raw / "iclr" / "2024" / "accepted.txt", "\n".join(abstracts[:3]) + "\n")
    write(raw / "ICML18_paper.csv", proper_csv(openreview_rows(2), OPENREVIEW_HEADER))
    write(raw / "acl-2025-long.jsonl", json.dumps({"abstract": abstracts[4]}) + "\n")
    write(raw / "misc" / "dump.txt", "\n".join(abstracts[5:8]) + "\n")
    records = [
        {"abstract": abstracts[8], "venue": "TMLR", "year": 2022},
        {"abstract": abstracts[9]},
    ]
    write(raw / "run01" / "mixed.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    result = ingest.ingest([raw])
    files = by_name(result)
    venues = result.records.group_by("source_path").agg(
        pl.col("venue").unique(), pl.col("year").unique()
    )
    found = {
        p.rsplit("/", 1)[-1]: (sorted(v, key=str), sorted(y, key=str))
        for p, v, y in venues.iter_rows()
    }
    assert found == {
        "oral.csv": (["NeurIPS"], [2023]),
        "accepted.txt": (["ICLR"], [2024]),
        "ICML18_paper.csv": (["ICML"], [2018]),
        "acl-2025-long.jsonl": (["ACL"], [2025]),
        "dump.txt": ([None], [None]),
        "mixed.jsonl": ([None, "TMLR"], [2022, None]),
    }
    assert files["accepted.txt"]["metadata_from"] == "path iclr/2024"
    assert files["oral.csv"]["warning"] is None
    warning = files["dump.txt"]["warning"]
    assert warning == (
        f"of 3 accepted records, 3 no venue and 3 no year; set them in "
        f'{raw / "paperlake.toml"}: files."misc/dump.txt" = '
        '{ venue = "<venue>", year = <year> }'
    )
    assert (files["mixed.jsonl"]["no_venue"], files["mixed.jsonl"]["no_year"]) == (1, 1)

    # The advice, filled in and pasted where it says, is a working settings line.
    line = warning.split("paperlake.toml: ", 1)[1]
    line = line.replace("<venue>", "Workshop").replace("<year>", "2021")
    assert tomllib.loads(line) == {"files": {"misc/dump.txt": {"venue": "Workshop", "year": 2021}}}
    write(raw / "paperlake.toml", line + "\n")
    again = by_name(ingest.ingest([raw]))
    assert (again["dump.txt"]["venue"], again["dump.txt"]["year"]) == ("Workshop", 2021)
    assert again["dump.txt"]["warning"] is None


def test_shifted_rows_are_rejoined_where_one_reading_fits_and_never_misassigned(tmp_path):
    rows = openreview_rows(400)
    # A few rows with commas that no reading can place: keywords without spaces beside a
    # title with commas, and a title with a bare comma beside an author list.
    for i in range(0, 400, 50):
        rows[i]["keywords"] = rows[i]["keywords"].replace(", ", ",") + ",x,y"
        rows[i]["title"] += ", revisited"
    broken = write(tmp_path / "naive.csv", naive_csv(rows, OPENREVIEW_HEADER))
    truth = write(tmp_path / "truth.csv", proper_csv(rows, OPENREVIEW_HEADER))
    result = ingest.ingest([broken, truth])
    files = by_name(result)
    assert files["truth.csv"]["accepted"] == 400
    shifted = sum(1 for row in rows if sum(v.count(",") for v in row.values()) > 0)
    assert shifted == 400  # every row has a comma inside some field
    repaired = json.loads(files["naive.csv"]["flag_counts"])["repaired_fields"]
    assert repaired / shifted >= 0.95
    assert files["naive.csv"]["rejected"] == 400 - repaired
    columns = ["external_id", "title", "authors", "abstract", "keywords", "decision"]
    got = result.records.filter(pl.col("source_path") == str(broken)).select(columns)
    expected = result.records.filter(pl.col("source_path") == str(truth)).select(columns)
    misassigned = got.join(expected, on=columns, how="anti")
    assert misassigned.height == 0
    rejected = set(result.rejects["record_no"].to_list())
    assert all((no - 1) % 50 == 0 for no in rejected)


def test_every_record_of_a_folder_of_hostile_exports_is_accounted(tmp_path):
    raw = tmp_path / "hostile"
    write_all(raw)
    result = ingest.ingest([raw], max_words=1500)
    files = by_name(result)
    assert files["not_json.json"]["format"] == "lines"
    assert files["not_json.json"]["error"] is None
    assert files["latin1.csv"]["rejected"] > 0
    assert json.loads(files["huge_line.txt"]["rejected_by_rule"]) == {"too_long": 1}
    assert json.loads(files["no_abstract_column.csv"]["rejected_by_rule"]) == {"empty_abstract": 3}
    assert result.sources["error"].null_count() == result.sources.height
    assert result.records.height == result.sources["accepted"].sum()
    assert result.rejects.height == result.sources["rejected"].sum()


def test_what_a_name_says_is_said_of_each_file_even_when_contents_are_equal(tmp_path):
    raw, cache = tmp_path / "raw", tmp_path / "cache"
    text = "\n".join(sample_abstracts()[:2]) + "\n"
    write(raw / "a_not_json.json", text)
    write(raw / "b_plain.txt", text)
    write(raw / "README.md", "# About these files\n\n" + text)
    for _ in range(2):  # parsed, then from the parse cache
        files = by_name(ingest.ingest([raw], cache_dir=cache))
        assert files["a_not_json.json"]["warning"].startswith(
            "named .json but the content is lines; read as lines; of 2 accepted records"
        )
        assert files["b_plain.txt"]["warning"].startswith("of 2 accepted records")
        assert (files["README.md"]["format"], files["README.md"]["records_seen"]) == (
            "documentation",
            0,
        )
        assert files["README.md"]["warning"].startswith("documentation, not data: not read")
    named = by_name(ingest.ingest([raw / "README.md"]))
    assert (named["README.md"]["records_seen"], named["README.md"]["accepted"]) == (2, 1)


def test_validate_on_hostile_exports_shows_no_traceback_and_accounts_for_every_file(tmp_path):
    import subprocess
    import sys

    raw = tmp_path / "hostile"
    write_all(raw)
    done = subprocess.run(
        [sys.executable, "-m", "flows.cli", "validate", str(raw), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    files = json.loads(done.stdout)
    assert len(files) == 11
    assert all(f["seen"] == f["accepted"] + f["rejected"] for f in files)
    assert sum(f["seen"] for f in files) == 3201 + 403 + 38
    warned = {f["path"].rsplit("/", 1)[-1]: f["warning"] for f in files if f["warning"]}
    assert warned["not_json.json"].startswith("named .json but the content is lines")
    assert warned["scrape_lost_p.jsonl"].startswith("'p' is 0.00% of its letters")


def test_a_file_that_cannot_be_read_costs_that_file_and_nothing_else(tmp_path):
    from flows.core.settings import Settings
    from flows.publish import current_fingerprint

    raw = tmp_path / "raw"
    write(raw / "good.txt", "\n".join(sample_abstracts()[:2]) + "\n")
    (raw / "eio.txt").symlink_to("/proc/self/mem")  # reading it fails with EIO
    files = by_name(ingest.ingest([raw]))
    assert files["eio.txt"]["error"].endswith("eio.txt: cannot be read: Input/output error")
    assert (files["eio.txt"]["records_seen"], files["good.txt"]["accepted"]) == (0, 2)
    # The up-to-date check hashes the inputs too: it records the file as unreadable.
    assert current_fingerprint(Settings(raw=(raw,), warehouse=tmp_path / "w"))


def test_parquet_binary_text_and_non_finite_years_cost_no_record(tmp_path):
    """A binary abstract column is text (not "b'...'"); NaN and infinite years are no year."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = sample_abstracts()[:4]
    table = pa.table(
        {
            "title": ["First", "Second", "Third", "Fourth"],
            "abstract": pa.array(
                [
                    texts[0].encode(),
                    texts[1].encode(),
                    b"\xff" + texts[2].encode(),
                    texts[3].encode("utf-16"),
                ],
                pa.binary(),
            ),  # fmt: skip
            "year": pa.array([2020.0, float("nan"), float("inf"), 2021.0]),
        }
    )
    pq.write_table(table, tmp_path / "binary.parquet")
    result = ingest.ingest([tmp_path], min_words=5)
    row = by_name(result)["binary.parquet"]
    assert (row["records_seen"], row["error"]) == (4, None)
    records = {r["title"]: r for r in result.records.iter_rows(named=True)}
    assert records["First"]["abstract"][:60] == texts[0][:60]
    assert not any(r["abstract"].startswith("b'") for r in records.values())
    assert [records[t]["year"] for t in ("First", "Second", "Third")] == [2020, None, None]
    # A stray byte costs that byte only (U+FFFD in its place).
    assert records["Third"]["abstract"][:61] == "\ufffd" + texts[2][:60]  # marked, not lost


def test_a_line_longer_than_a_record_may_be_costs_that_record_only(tmp_path):
    """A line past MAX_LINE_BYTES (a .gz of one huge line, a JSON Lines record of 6 MB,
    a block without blank lines) is read past without being kept and rejected as
    too_long; the records around it are read."""
    from flows.ingest.readers.common import MAX_LINE_BYTES

    good = sample_abstracts()[:2]
    huge = ("word " * (MAX_LINE_BYTES // 5 + 1000)).encode()
    with gzip.open(tmp_path / "one_line.txt.gz", "wb") as out:
        out.write(huge + b"\n" + good[0].encode() + b"\n")
    lines = [json.dumps({"abstract": good[0]}), json.dumps({"abstract": huge.decode()}),
             json.dumps({"abstract": good[1]})]  # fmt: skip
    write(tmp_path / "big.jsonl", "\n".join(lines) + "\n")
    block = "\n".join(["lorem ipsum dolor " * 100] * (MAX_LINE_BYTES // 1800 + 10))
    write(tmp_path / "blocks.txt", f"ICLR 2026 Papers\n\n{good[0]}\n\n{block}\n\n{good[1]}\n")
    result = ingest.ingest([tmp_path], min_words=5)
    rows = by_name(result)
    assert {n: (r["accepted"], r["rejected"]) for n, r in rows.items()} == {
        "one_line.txt.gz": (1, 1), "big.jsonl": (2, 1), "blocks.txt": (2, 1),
    }  # fmt: skip
    rejects = result.rejects.filter(pl.col("rule") == "too_long").sort("source_path")
    assert rejects["line"].to_list() == [2, 5, 1]  # big.jsonl, blocks.txt, one_line.txt.gz
    reason = rejects.filter(pl.col("source_path").str.ends_with("one_line.txt.gz"))["reason"][0]
    assert re.fullmatch(r"a line of [\d,]+ bytes, longer than the 4,194,304 bytes one record "
                        r"may have", reason), reason  # fmt: skip
