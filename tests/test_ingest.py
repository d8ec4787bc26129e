"""Ingest on tiny explicit files: parsing, locations, cleaning, links, rejects."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import polars as pl
import pytest

from flows import ingest
from tests.conftest import SAMPLE_RAW, write

ALPHA = (
    "We study alpha transport for speculative decoding and show that the optimal coupling "
    "between draft and target distributions reduces latency by half on standard benchmarks."
)
BETA = (
    "Graph neural networks over molecules are trained with a contrastive objective and "
    "reach a new state of the art on property prediction while using fewer labelled samples."
)
GAMMA = (
    "A memory agent reads long documents in segments and overwrites its memory so that "
    "question answering over millions of tokens keeps its accuracy with linear cost overall."
)


def blocks_file(tmp_path, name="dump.txt", header="ICLR 2026 Papers", blocks=(ALPHA, BETA)):
    body = "\n\n".join(blocks)
    return write(tmp_path / name, f"{header}\n\n{body}\n" if header else f"{body}\n")


def clean(text: str) -> str:
    return pl.DataFrame({"t": [text]}).select(ingest.clean_text("t")).item()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (r"the \textbf{Webscale-RL} pipeline", "the Webscale-RL pipeline"),
        (r"the \textbf{\texttt{Webscale-RL} pipeline}", "the Webscale-RL pipeline"),
        (r"a \textit{cross-tokenizer} score", "a cross-tokenizer score"),
        (r"Code at \url{https://github.com/a/b}.", "Code at https://github.com/a/b."),
        (r"less than 1\% compute", "less than 1% compute"),
        ("the **Prophet** decoder", "the Prophet decoder"),
        ("**Ex**tensive **D**iffusion", "Extensive Diffusion"),
        ("by ``overthinking'' models", 'by "overthinking" models'),
        ("up to 100$\\times$ fewer", "up to 100× fewer"),
        ("only $\\mathcal{O}(1)$ calls", "only O(1) calls"),
        ("a $\\textbf{symmetric space}$ of", "a symmetric space of"),
        ("many   spaces\tand\nlines ", "many spaces and lines"),
        ("e\u0301clair", "\u00e9clair"),  # NFC
    ],
)
def test_clean_text(raw, expected):
    assert clean(raw) == expected


def test_parse_header():
    assert ingest.parse_header("ICLR 2026 Papers") == ("ICLR", 2026)
    assert ingest.parse_header("NeurIPS 2024") == ("NeurIPS", 2024)
    assert ingest.parse_header("We study 2026 problems in depth and more words here.") is None


def test_links_are_classified():
    links = ingest.extract_links(
        "Code: https://github.com/pixas/DECS. Review https://anonymous.4open.science/r/X-1/ "
        "and https:// broken, see https://example.org/page)."
    )
    assert links == [
        {"url": "https://github.com/pixas/DECS", "kind": "code"},
        {"url": "https://anonymous.4open.science/r/X-1/", "kind": "review"},
        {"url": "https://", "kind": "broken"},
        {"url": "https://example.org/page", "kind": "web"},
    ]


def test_blocks_with_locations(tmp_path):
    path = blocks_file(tmp_path)
    result = ingest.ingest([path])
    records = result.records.sort("record_no")
    assert records["record_no"].to_list() == [1, 2]
    assert records["line"].to_list() == [3, 5]
    # "ICLR 2026 Papers\n\n" is 18 bytes; the second block starts after ALPHA and a blank line.
    assert records["byte_offset"].to_list() == [18, 18 + len(ALPHA.encode()) + 2]
    assert records["venue"].to_list() == ["ICLR", "ICLR"]
    assert records["year"].to_list() == [2026, 2026]
    data = path.read_bytes()
    assert data[18 : 18 + 10] == ALPHA.encode()[:10]
    source = result.sources.row(0, named=True)
    assert source["format"] == "blocks"
    assert (source["records_seen"], source["accepted"], source["rejected"]) == (2, 2, 0)


def test_empty_block_is_rejected_with_location(tmp_path):
    path = blocks_file(tmp_path, blocks=(ALPHA, "   \t ", BETA))
    result = ingest.ingest([path])
    assert result.rejects.select("record_no", "line", "rule").rows() == [(2, 5, "empty_abstract")]
    assert result.records.height == 2
    source = result.sources.row(0, named=True)
    assert source["records_seen"] == source["accepted"] + source["rejected"] == 3


def test_too_short_record_is_rejected(tmp_path):
    path = blocks_file(tmp_path, blocks=(ALPHA, "Too short to be an abstract."))
    rejects = ingest.ingest([path]).rejects
    assert rejects["rule"].to_list() == ["too_short"]
    assert rejects["reason"].to_list() == ["abstract has 6 words, fewer than the minimum of 20"]


def test_duplicate_abstract_is_one_paper_with_every_location(tmp_path):
    first = blocks_file(tmp_path, "a.txt", blocks=(ALPHA, BETA, ALPHA))
    second = blocks_file(tmp_path, "b.txt", blocks=(GAMMA, "  " + ALPHA.replace(" ", "  ")))
    result = ingest.ingest([first, second])
    papers, locations = ingest.build_papers(result.records)
    assert papers.height == 3
    alpha_id = ingest.content_id(None, ALPHA)
    alpha = papers.filter(pl.col("paper_id") == alpha_id).row(0, named=True)
    assert (alpha["source_path"], alpha["record_no"], alpha["n_locations"]) == (str(first), 1, 3)
    where = locations.filter(pl.col("paper_id") == alpha_id).select("source_path", "line").rows()
    assert sorted(where) == [(str(first), 3), (str(first), 7), (str(second), 5)]


def test_invalid_utf8_record_is_rejected_rest_kept(tmp_path):
    data = f"ICLR 2026 Papers\n\n{ALPHA}\n\n".encode() + b"Broken \xff\xfe bytes " + BETA.encode()
    path = write(tmp_path / "bad.txt", data + b"\n\n" + GAMMA.encode() + b"\n")
    result = ingest.ingest([path])
    assert result.rejects["rule"].to_list() == ["invalid_utf8"]
    offset = 18 + len(ALPHA.encode()) + 2
    assert result.rejects["reason"].to_list() == [f"invalid UTF-8 at byte {offset + 7}"]
    assert result.records.height == 2


@pytest.mark.parametrize(
    ("content", "error"),
    [(b"", "file is empty"), (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary content")],
)
def test_unreadable_file_is_reported_and_skipped(tmp_path, content, error):
    bad = write(tmp_path / "raw" / "broken.txt", content)
    good = blocks_file(tmp_path / "raw", "good.txt")
    result = ingest.ingest([tmp_path / "raw"])
    sources = {r["path"]: r for r in result.sources.iter_rows(named=True)}
    assert error in sources[str(bad)]["error"]
    assert str(bad) in sources[str(bad)]["error"]
    assert sources[str(bad)]["records_seen"] == 0
    assert sources[str(good)]["accepted"] == 2
    assert result.records.height == 2


def test_one_abstract_per_line(tmp_path):
    path = write(tmp_path / "lines.txt", f"{ALPHA}\n{BETA}\n{GAMMA}\n")
    result = ingest.ingest([path])
    assert result.sources["format"].to_list() == ["lines"]
    assert result.records.sort("record_no")["line"].to_list() == [1, 2, 3]
    assert result.records["venue"].to_list() == [None, None, None]


def test_folders_are_read_recursively_hidden_files_skipped(tmp_path):
    blocks_file(tmp_path / "raw" / "2026", "a.txt")
    blocks_file(tmp_path / "raw", ".hidden.txt")
    found = ingest.discover([tmp_path / "raw", tmp_path / "raw" / "2026" / "a.txt"])
    assert [p.name for p in found] == ["a.txt"]


def test_missing_raw_path_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        ingest.discover([tmp_path / "nothing-here"])


def test_sample_files():
    result = ingest.ingest([SAMPLE_RAW])
    papers, _ = ingest.build_papers(result.records)
    assert result.sources["records_seen"].to_list() == [19, 19]
    assert papers.height == 38
    assert result.rejects.height == 0
    macros = papers.filter(pl.col("unresolved_macros").list.len() > 0)
    assert sorted(macros["unresolved_macros"].list.first().to_list()) == ["\\method", "\\ours"]
    kinds = papers.select(pl.col("links").list.explode()).unnest("links")["kind"]
    assert sorted(kinds.drop_nulls().to_list()) == ["broken", "code", "code", "review", "review"]


def test_a_digest_memo_reads_a_file_again_only_when_its_stat_changed(tmp_path, monkeypatch):
    from flows.ingest import paths

    big = "ICLR 2026 Papers\n\n" + "an abstract of many words " * 10_000  # past 2 EDGE
    old, fresh = tmp_path / "old.txt", tmp_path / "fresh.txt"
    old.write_text(big)
    fresh.write_text(big + "written just now")
    os.utime(old, ns=(time.time_ns() - 60_000_000_000,) * 2)  # a minute ago
    memo = paths.DigestMemo(tmp_path)
    expected = {p: paths.file_digest(p) for p in (old, fresh)}
    assert [memo.digest(p) for p in (old, fresh)] == [expected[old], expected[fresh]]
    memo.save()
    read: list[Path] = []
    real = paths.file_digest

    def counted(path: Path):
        read.append(path)
        return real(path)

    monkeypatch.setattr(paths, "file_digest", counted)
    again = paths.DigestMemo(tmp_path)
    assert [again.digest(p) for p in (old, fresh)] == [expected[old], expected[fresh]]
    # The old file is known; the fresh one was written within the racy window: read again.
    assert read == [fresh]
    # Same size, another time: read again, and the new hash is what it gives.
    old.write_text(big.replace("an abstract", "an abstrakt", 1))
    os.utime(old, ns=(time.time_ns() - 30_000_000_000,) * 2)
    changed = paths.DigestMemo(tmp_path).digest(old)
    assert read == [fresh, old] and changed[0] != expected[old][0]
    # A small file is hashed whole each time: its edges are the whole of it.
    small = write(tmp_path / "small.txt", "ICLR 2026 Papers\n\nan abstract")
    os.utime(small, ns=(time.time_ns() - 60_000_000_000,) * 2)
    paths.DigestMemo(tmp_path).digest(small)
    assert read[-1] == small
    # Saving keeps only the files read since the memo was opened.
    only_fresh = paths.DigestMemo(tmp_path)
    only_fresh.digest(fresh)
    only_fresh.save()
    kept = json.loads((tmp_path / paths.DigestMemo.NAME).read_text())["record"]
    assert list(kept) == [str(fresh.resolve())]
    # try_digest takes the memo and still names a file it cannot read.
    sha, size, error = paths.try_digest(tmp_path / "gone.txt", paths.DigestMemo(tmp_path))
    assert sha.startswith("unreadable:") and size == 0 and "gone.txt: cannot be read" in error
