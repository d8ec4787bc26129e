"""Big files read in chunks (flows/ingest/chunks.py, chunked.py): a chunked read equals the
whole-file read record for record, offsets, rejects and the sources row included, in
process and as a cluster does it (a job a chunk, then the parse cache put together)."""

from __future__ import annotations

import io
import json
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flows import ingest
from flows.ingest import anomalies, batch, model
from flows.ingest import read as ingest_read
from flows.ingest.cache import ParseCache
from flows.ingest.chunked import parse_in_chunks
from flows.ingest.model import Span
from flows.ingest.readers import common
from flows.ingest.readers import json as json_reader
from tests.conftest import SHARED_CORPORA, write
from tests.hostile import (
    NOT_PROSE,
    OPENREVIEW_HEADER,
    inner_quote_rows,
    mojibake,
    naive_csv,
    openreview_rows,
    proper_csv,
    stripped_letter,
    undoubled_csv,
    unpinned_rows,
)

WHOLE = ingest.Chunking(file_bytes=1 << 40)
MULTIBYTE = " Ünïcödé — “quoted” 中文 ✓ 🧪"


def chunked(size: int) -> ingest.Chunking:
    """Every file read in chunks of `size` bytes."""
    return ingest.Chunking(file_bytes=1, chunk_bytes=size)


def chunks_read(result: ingest.IngestResult) -> int:
    """How many chunks the records of a read came from (0: read whole)."""
    names = [str(part).rsplit("/", 1)[-1] for part, _, _ in result.parts]
    return len({m.group(0) for n in names if (m := re.match(r"chunk-\d+", n))})


def assert_same(mine: ingest.IngestResult, whole: ingest.IngestResult) -> None:
    for table in ("sources", "records", "rejects"):
        a, b = getattr(mine, table), getattr(whole, table)
        assert a.columns == b.columns and a.height == b.height, table
        for column in a.columns:
            assert a[column].equals(b[column]), (table, column)


def jsonl_record(row: dict, **changes) -> bytes:
    fields = {k: row[k] for k in ("id", "title", "authors", "abstract", "keywords", "decision")}
    return json.dumps(fields | changes, ensure_ascii=False).encode()


def hostile_jsonl(n: int = 40, seed: int = 21) -> bytes:
    """JSON Lines as exports break it: blank and whitespace lines, broken JSON, invalid
    UTF-8, a value that is no object, short, empty, code and over-long abstracts,
    mojibake, entities escaped twice, CRLF, multibyte text, no newline at the end."""
    rows = openreview_rows(n, seed)
    rng = random.Random(seed)
    lines = [
        jsonl_record(row, abstract=row["abstract"] + (MULTIBYTE if i % 3 == 0 else ""))
        for i, row in enumerate(rows)
    ]
    odd = [
        b"",
        b"   \t ",
        b'{"id": "broken", "abstract": "no end',
        b'{"id": "bytes", "abstract": "an invalid byte \xff in the middle of the text"}',
        b"[1, 2, 3]",
        jsonl_record(rows[0], id="short", title=None, abstract="Too short to be one."),
        jsonl_record(rows[1], id="empty", abstract="", title=None),
        jsonl_record(rows[2], id="code", abstract=NOT_PROSE["javascript"]),
        jsonl_record(rows[3], id="moji", abstract=mojibake(rows[3]["abstract"] + " café")),
        jsonl_record(rows[4], id="twice", abstract=rows[4]["abstract"] + " &amp;amp; more"),
        jsonl_record(rows[5], id="long", abstract=rows[5]["abstract"] * 8),
        jsonl_record(rows[6], id="crlf") + b"\r",
    ]
    for line in odd:
        lines.insert(rng.randrange(1, len(lines)), line)
    return b"\n".join(lines)  # no newline after the last line


def csv_rows(text: str) -> list[str]:
    """The rows of a CSV text after its header line, as one string."""
    return [text.split("\n", 1)[1]]


def hostile_csv(n: int = 30, seed: int = 23) -> bytes:
    """CSV as exports break it: quoted line breaks, quotes not doubled (some pinned down,
    some not, one over two lines), commas that shift a row, too few fields, blank lines,
    invalid UTF-8, multibyte text, CRLF, no newline at the end."""
    rows = openreview_rows(n, seed)
    for i, row in enumerate(rows):
        if i % 4 == 1:
            row["abstract"] = f"A first line.\nA second, after a break.\n{row['abstract']}"
        if i % 5 == 2:
            row["abstract"] += MULTIBYTE
    pieces = [
        proper_csv(rows, OPENREVIEW_HEADER).split("\n", 1)[1],
        undoubled_csv(inner_quote_rows(12, seed) + unpinned_rows(), OPENREVIEW_HEADER),
        naive_csv(openreview_rows(6, seed + 1), OPENREVIEW_HEADER),
        "\n\n",
        "x,y\n",
        "or9,Bytes,Ada Lovelace,An invalid byte \udcff in a row's abstract,k,Reject,u\n",
        proper_csv(openreview_rows(3, seed + 2), OPENREVIEW_HEADER).replace("\n", "\r\n"),
    ]
    body = [p.split("\n", 1)[1] if p.startswith("id,") else p for p in pieces]
    rng = random.Random(seed)
    lines = "".join(body).split("\n")
    blocks = [lines[i : i + 7] for i in range(0, len(lines), 7)]  # keeps most rows whole
    rng.shuffle(blocks)
    text = ",".join(OPENREVIEW_HEADER) + "\n" + "\n".join(line for b in blocks for line in b)
    return text.rstrip("\n").encode("utf-8", "surrogateescape")


@pytest.fixture
def long_lines(monkeypatch):
    """Lines over 4,000 bytes are too long, so a small file holds one."""
    monkeypatch.setattr(common, "MAX_LINE_BYTES", 4000)


@pytest.mark.parametrize("size", [600, 2500, 9000])
@pytest.mark.parametrize("cached", [False, True])
def test_a_chunked_jsonl_file_reads_as_the_whole_file(tmp_path, long_lines, size, cached):
    raw = tmp_path / "raw"
    write(raw / "export.jsonl", hostile_jsonl())
    whole = ingest.ingest([raw], chunking=WHOLE)
    cache = tmp_path / "cache" if cached else None
    mine = ingest.ingest([raw], cache_dir=cache, chunking=chunked(size))
    assert chunks_read(mine) > 2
    assert_same(mine, whole)
    rules = set(whole.rejects["rule"])
    assert {"invalid_json", "invalid_utf8", "too_long", "too_short", "not_prose"} <= rules
    assert whole.sources["warning"].item().startswith("mojibake such as")
    if cached:  # read back from the cache: the same again
        again = ingest.ingest([raw], cache_dir=cache, chunking=chunked(size))
        assert again.files[0].cached
        assert_same(again, whole)


@pytest.mark.parametrize("size", [500, 3000, 12000])
def test_a_chunked_csv_file_reads_as_the_whole_file(tmp_path, size):
    raw = tmp_path / "raw"
    write(raw / "export.csv", hostile_csv())
    whole = ingest.ingest([raw], chunking=WHOLE)
    mine = ingest.ingest([raw], cache_dir=tmp_path / "cache", chunking=chunked(size))
    assert chunks_read(mine) > 2
    assert_same(mine, whole)
    flags = set(whole.records["flags"].explode().drop_nulls())
    assert {"repaired_quotes", "repaired_fields"} <= flags
    assert {"unparseable_row", "wrong_field_count", "invalid_utf8"} <= set(whole.rejects["rule"])
    assert whole.records["line"].n_unique() == whole.records.height


@pytest.mark.parametrize("cached", [False, True])
def test_files_of_the_same_content_are_each_read_as_whole(tmp_path, cached):
    raw = tmp_path / "raw"
    write(raw / "a" / "export.csv", hostile_csv())
    write(raw / "b" / "export.csv", hostile_csv())
    whole = ingest.ingest([raw], chunking=WHOLE)
    cache = tmp_path / "cache" if cached else None
    mine = ingest.ingest([raw], cache_dir=cache, chunking=chunked(4000))
    assert chunks_read(mine) > 2
    assert_same(mine, whole)
    assert all(part.exists() for part, _, _ in mine.parts)


def test_a_cut_inside_a_multibyte_character_moves_to_the_next_record(tmp_path):
    data = hostile_jsonl()
    raw = tmp_path / "raw"
    write(raw / "export.jsonl", data)
    inside = data.index("中".encode()) + 1  # the second byte of a three-byte character
    whole = ingest.ingest([raw], chunking=WHOLE)
    mine = ingest.ingest([raw], chunking=chunked(inside))
    assert chunks_read(mine) >= 2
    assert_same(mine, whole)


def lost_p_jsonl(kept: int = 3, lost: int = 150) -> str:
    """Records that keep their letters, then records a scrape stripped of every 'p'."""
    rows = openreview_rows(kept + lost, seed=31)
    return "".join(
        json.dumps(
            {"id": r["id"], "title": r["title"], "abstract": stripped_letter(r["abstract"], "p")}
            if i >= kept
            else {"id": r["id"], "title": r["title"], "abstract": r["abstract"]}
        )
        + "\n"
        for i, r in enumerate(rows)
    )


@pytest.mark.parametrize("cut", ["records", "characters"])
def test_lost_letters_are_told_over_the_whole_reads_batches(tmp_path, monkeypatch, cut):
    """The letters of a batch's first records decide what later batches flag: the chunks'
    records are flagged as the whole read flags them, wherever chunks and batches cut."""
    if cut == "records":
        monkeypatch.setattr(ingest_read, "BATCH_RECORDS", 10)
    else:  # a small file is parsed in one frame: this one is streamed as a big one is
        monkeypatch.setattr(ingest_read, "BATCH_CHARS", 9000)
        monkeypatch.setattr(batch, "SMALL_FILE_BYTES", -1)
    monkeypatch.setattr(anomalies, "SAMPLE_RECORDS", 4)
    raw = tmp_path / "raw"
    write(raw / "scrape.jsonl", lost_p_jsonl())
    whole = ingest.ingest([raw], chunking=WHOLE)
    flagged = whole.records["flags"].list.contains("missing_letter:p")
    assert 0 < flagged.sum() < 150  # flagged from the batch where its share falls, on
    assert whole.sources["warning"].item().startswith("'p' is ")
    for size in (1500, 7000, 20000):
        cache = tmp_path / f"cache{size}"
        mine = ingest.ingest([raw], cache_dir=cache, chunking=chunked(size))
        assert chunks_read(mine) > 1
        assert_same(mine, whole)
        kept = {part for part, _, _ in mine.parts}  # the parts flagged again, and no others
        assert any(part.name.endswith("-flagged.parquet") for part in kept)
        assert set(cache.glob("*/chunk-*.parquet")) == kept


def test_a_batch_of_code_is_read_whole(tmp_path):
    """A batch that is mostly code rejects its other records too (not_prose): where the
    whole read makes one, the chunks cannot stand for it and the file is read whole."""
    rows = openreview_rows(4, seed=41)
    texts = [text for text in NOT_PROSE.values() if isinstance(text, str)] * 2
    code = [{"id": f"c{i}", "title": "Code", "abstract": t} for i, t in enumerate(texts)]
    lines = [
        json.dumps(r) for r in code + [{"id": r["id"], "abstract": r["abstract"]} for r in rows]
    ]
    raw = tmp_path / "raw"
    write(raw / "code.jsonl", "\n".join(lines) + "\n")
    whole = ingest.ingest([raw], chunking=WHOLE)
    assert whole.sources["accepted"].item() == 0  # prose among code is taken as code
    cache = tmp_path / "cache"
    mine = ingest.ingest([raw], cache_dir=cache, chunking=chunked(2000))
    assert chunks_read(mine) == 0
    assert_same(mine, whole)
    assert not list(cache.glob("*.chunks"))


def test_a_cluster_parses_a_chunk_a_job_and_the_run_puts_them_together(tmp_path, long_lines):
    raw = tmp_path / "raw"
    write(raw / "export.jsonl", hostile_jsonl())
    write(raw / "export.csv", hostile_csv())
    write(raw / "small.jsonl", b"\n".join(jsonl_record(r) for r in openreview_rows(2)))
    whole = ingest.ingest([raw], chunking=WHOLE)
    cache, chunking = tmp_path / "cache", ingest.Chunking(file_bytes=5000, chunk_bytes=3000)
    jobs = ingest.pending_parses([raw], 20, None, cache, chunking)
    chunked_jobs = [job for job in jobs if job.chunk is not None]
    assert {job.path.name for job in chunked_jobs} == {"export.jsonl", "export.csv"}
    assert [job.path.name for job in jobs if job.chunk is None] == ["small.jsonl"]
    parses = ParseCache(cache, 20)
    for job in reversed(jobs):  # workers finish in any order
        ingest.parse_into_cache(job, parses)
    mine = ingest.ingest([raw], cache_dir=cache, chunking=chunking)
    assert chunks_read(mine) > 4
    assert_same(mine, whole)
    assert ingest.pending_parses([raw], 20, None, cache, chunking) == []
    assert not list(cache.glob("*.chunks"))


def test_chunks_of_another_plan_are_dropped(tmp_path):
    raw = tmp_path / "raw"
    write(raw / "export.csv", hostile_csv())
    cache = tmp_path / "cache"
    jobs = ingest.pending_parses([raw], 20, None, cache, chunked(3000))
    ingest.parse_into_cache(jobs[1], ParseCache(cache, 20))  # one chunk of that plan
    mine = ingest.ingest([raw], cache_dir=cache, chunking=chunked(5000))
    assert 2 < chunks_read(mine) < len(jobs)
    assert_same(mine, ingest.ingest([raw], chunking=WHOLE))


def test_a_file_changed_after_its_chunks_were_planned_is_read_whole(tmp_path):
    raw = tmp_path / "raw"
    path = write(raw / "export.jsonl", hostile_jsonl())
    cache, chunking = tmp_path / "cache", chunked(3000)
    jobs = ingest.pending_parses([raw], 20, None, cache, chunking)
    assert len(jobs) > 2
    data = path.read_bytes()
    path.write_bytes(data.replace(b"Record 1,", b"Record 9,"))  # the same size, other bytes
    parses = ParseCache(cache, 20)
    counts = [ingest.parse_into_cache(job, parses)[0] for job in jobs]
    assert sum(c.records_seen for c in counts) > 0
    assert parse_in_chunks(jobs[0], parses, chunking) is None  # a chunk saw other bytes
    mine = ingest.ingest([raw], cache_dir=cache, chunking=chunking)
    assert_same(mine, ingest.ingest([raw], chunking=WHOLE))


# One line or row of a generated file, and how many of each a file holds.
JSONL_PIECES = [
    b'{"id": "a", "title": "T", "abstract": "We study sparse attention in long documents and '
    b'show it keeps accuracy while cutting the cost of every layer by half."}',
    '{"id": "m", "abstract": "Ünïcödé — “quoted” 中文 ✓ 🧪 text of a record, long enough to '
    'be one, with words and more words in it."}'.encode(),
    b"",
    b"  ",
    b'{"abstract": "broken',
    b'{"abstract": "\xff\xfe"}',
    b'{"abstract": "Too short."}\r',
    b"[]",
]
CSV_PIECES = [
    "p1,A title,Ada Lovelace,We study sparse attention in long documents and show it keeps "
    "accuracy while cutting the cost of every layer by half.,k,Reject,https://x.org/p1",
    'p2,"A title, with a comma",Ada,"A quoted abstract\nover two lines, with ""quotes"" that '
    'are doubled, long enough to be a record of its own.",k,Accept,https://x.org/p2',
    'p3,T,A,"An abstract with "undoubled" quotes in it, long enough to be read as one.",k,'
    "Accept,https://x.org/p3",
    'p4,T,A,"A row over two lines with "undoubled\nquotes" that no reading pins.",k,R,u',
    "p5,Shifted, by a comma,A,An abstract whose title shifts the row, long enough to be one "
    "record at least.,k,Reject,https://x.org/p5",
    "",
    "x,y",
    "p6,T,A,Ünïcödé — “quoted” 中文 ✓ 🧪 text of a row with words and more words.,k,R,u",
]


@st.composite
def generated_files(draw) -> tuple[str, bytes, int]:
    kind = draw(st.sampled_from(["jsonl", "csv"]))
    pieces = JSONL_PIECES if kind == "jsonl" else [p.encode() for p in CSV_PIECES]
    picked = draw(st.lists(st.sampled_from(pieces), min_size=1, max_size=30))
    head = [",".join(OPENREVIEW_HEADER).encode()] if kind == "csv" else []
    data = b"\n".join(head + picked) + draw(st.sampled_from([b"", b"\n", b"\r\n"]))
    return kind, data, draw(st.integers(1, max(1, len(data))))


@settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(generated_files())
def test_any_chunk_size_reads_a_generated_file_as_the_whole_file(tmp_path_factory, generated):
    kind, data, size = generated
    raw = tmp_path_factory.mktemp("raw")
    write(raw / f"file.{kind}", data)
    assert_same(ingest.ingest([raw], chunking=chunked(size)), ingest.ingest([raw], chunking=WHOLE))


@pytest.mark.skipif(not SHARED_CORPORA.is_dir(), reason="no shared corpora here")
@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("arxiv/arxiv-metadata-oai-snapshot.json", 20_000),
        ("openreview/ICLR17_submissions.csv", 40_000),
    ],
)
def test_the_real_corpora_read_in_chunks_as_whole(tmp_path, name, size):
    path = SHARED_CORPORA / name
    whole = ingest.ingest([path], chunking=WHOLE)
    mine = ingest.ingest([path], cache_dir=tmp_path / "cache", chunking=chunked(size))
    assert chunks_read(mine) > 5
    assert_same(mine, whole)
    assert whole.records.height > 100


@pytest.mark.skipif(not SHARED_CORPORA.is_dir(), reason="no shared corpora here")
def test_a_cluster_spreads_a_file_in_chunks_and_publishes_what_one_process_does(
    prefect_server, tmp_path, monkeypatch
):
    """The flow on a LocalCluster of 2 parses each chunk as a task (parse_file) and
    publishes the tables one process publishes reading the file whole."""
    from distributed import LocalCluster

    from flows.core.settings import Settings
    from flows.pipeline import flow_for, paperlake
    from flows.publish import history

    raw = tmp_path / "raw"
    arxiv = SHARED_CORPORA / "arxiv" / "arxiv-metadata-oai-snapshot.json"
    write(raw / "arxiv.json", arxiv.read_bytes())
    here = Settings(warehouse=tmp_path / "here", raw=(raw,))
    with monkeypatch.context() as m:
        m.setattr(model, "CHUNKING", WHOLE)
        paperlake(warehouse=str(here.warehouse), raw=[str(raw)])
    monkeypatch.setattr(model, "CHUNKING", chunked(40_000))
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        there = here.with_(warehouse=tmp_path / "there", cluster=cluster.scheduler_address)
        summary = flow_for(there)(warehouse=str(there.warehouse), raw=[str(raw)])
    assert history.checksums(there)[1:] == history.checksums(here)[1:]
    assert summary.files_parsed == 1
    parts = list((there.cache_path / "parsed").glob("*/chunk-*-records-*.parquet"))
    assert len({part.name.split("-records")[0] for part in parts}) > 5  # 40 kB of 287 kB


def test_records_of_a_span_carry_the_files_lines_and_offsets():
    data = b'{"abstract": "one"}\n\n{"abstract": "two"}\n{"abstract": "three"}\n'
    start, stop = data.index(b'{"abstract": "two"}'), data.index(b'{"abstract": "three"}')
    layout = ingest.Layout("jsonl")
    records = list(
        json_reader.read_span(io.BytesIO(data), layout, ingest.NO_OVERRIDE, Span(start, stop, 2))
    )
    assert [(r["line"], r["byte_offset"], r["abstract_raw"]) for r in records] == [
        (3, start, "two")
    ]
