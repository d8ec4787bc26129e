"""What a raw folder holds besides plain files: names that are not UTF-8, links to folders
(and loops of them), FIFOs, sockets and broken links, and files that change while a run
reads them."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading

import polars as pl
import pytest
from typer.testing import CliRunner

from flows import ingest
from flows.cli import app
from flows.core.lake import open_lake
from flows.core.settings import Settings
from flows.ingest import paths as ingest_paths
from flows.ingest.rawfile import NotRegularFile, open_regular
from flows.pipeline import paperlake
from tests.conftest import SAMPLE_RAW, write
from tests.hostile import OPENREVIEW_HEADER, openreview_rows, proper_csv

SAMPLE, SAMPLE_2 = sorted(SAMPLE_RAW.glob("*.txt"))
ODD_FOLDER = b"sub\xff"  # not UTF-8: Python holds it as a surrogate escape
ODD_FILE = b"caf\xe9.txt"  # "café" in Latin-1


def odd_name_folder(root) -> bytes:
    """A raw folder holding the first sample file under a folder and file name that are not
    UTF-8; the file's path as bytes."""
    folder = os.path.join(os.fsencode(root), ODD_FOLDER)
    os.makedirs(folder)
    target = os.path.join(folder, ODD_FILE)
    with open(target, "wb") as out:
        out.write(SAMPLE.read_bytes())
    return target


def test_a_file_name_that_is_not_utf8_is_read_and_named_with_its_bytes(tmp_path):
    raw = tmp_path / "raw"
    odd_name_folder(raw)
    result = ingest.ingest([raw], cache_dir=tmp_path / "cache")
    (row,) = result.sources.iter_rows(named=True)
    assert row["path"] == f"{raw}/sub\\xff/caf\\xe9.txt"
    assert (row["records_seen"], row["accepted"], row["error"]) == (19, 19, None)
    assert row["warning"].startswith("its name is not UTF-8: shown with the bytes")
    assert result.records["source_path"].unique().to_list() == [row["path"]]
    # Read again from the parse cache: the same row and records.
    again = ingest.ingest([raw], cache_dir=tmp_path / "cache")
    assert again.sources.row(0, named=True)["sha256"] == row["sha256"]
    assert again.records["source_path"].unique().to_list() == [row["path"]]


def test_validate_names_a_file_whose_name_is_not_utf8_and_does_not_crash(tmp_path):
    odd_name_folder(tmp_path / "raw")
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "raw"), "--format", "json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["path"].endswith("/raw/sub\\xff/caf\\xe9.txt")
    assert (row["seen"], row["accepted"]) == (19, 19)


def test_links_to_folders_are_followed_each_file_read_once_and_loops_end(tmp_path):
    raw, outside = tmp_path / "raw", tmp_path / "outside"
    write(raw / "real" / "a.txt", SAMPLE.read_text())
    write(outside / "iclr_2024" / "b.csv", proper_csv(openreview_rows(3), OPENREVIEW_HEADER))
    (raw / "again").symlink_to(raw / "real")  # the same folder twice: its files once
    (raw / "more").symlink_to(outside)  # a folder outside the raw folder
    (outside / "up").symlink_to(tmp_path)  # a loop: outside/up/outside/up/...
    result = ingest.ingest([raw])
    rows = {r["path"]: r for r in result.sources.iter_rows(named=True)}
    assert sorted(rows) == [f"{raw}/more/iclr_2024/b.csv", f"{raw}/real/a.txt"]
    assert rows[f"{raw}/real/a.txt"]["accepted"] == 19
    linked = rows[f"{raw}/more/iclr_2024/b.csv"]
    # The folder names on the way through the link still name venue and year.
    assert (linked["accepted"], linked["venue"], linked["year"]) == (3, "ICLR", 2024)


def test_fifos_sockets_and_broken_links_are_listed_never_opened(tmp_path):
    raw = tmp_path / "raw"
    write(raw / "a.txt", SAMPLE.read_text())
    os.mkfifo(raw / "pipe.jsonl")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(raw / "sock.csv"))
    (raw / "gone.csv").symlink_to(tmp_path / "nowhere.csv")
    done: list[ingest.IngestResult] = []
    reader = threading.Thread(target=lambda: done.append(ingest.ingest([raw])), daemon=True)
    reader.start()
    reader.join(timeout=120)
    if reader.is_alive():  # let the blocked open go before failing
        os.close(os.open(raw / "pipe.jsonl", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("ingest blocked on opening a FIFO")
    server.close()
    rows = {r["path"].rsplit("/", 1)[-1]: r for r in done[0].sources.iter_rows(named=True)}
    assert rows["a.txt"]["accepted"] == 19
    pipe, sock, gone = rows["pipe.jsonl"], rows["sock.csv"], rows["gone.csv"]
    assert (pipe["format"], pipe["records_seen"], pipe["error"]) == ("not_regular", 0, None)
    assert pipe["warning"] == "a FIFO (named pipe), not a regular file: not read"
    assert sock["warning"] == "a socket, not a regular file: not read"
    assert (
        gone["warning"]
        == f"a broken symbolic link (to {tmp_path}/nowhere.csv), not a regular file: not read"
    )


def test_opening_a_fifo_raises_at_once_instead_of_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(NotRegularFile, match=r"a FIFO \(named pipe\), not a regular file"):
        open_regular(tmp_path / "pipe")
    sha, size, error = ingest.try_digest(tmp_path / "pipe")
    assert (sha, size, error) == (
        "not-regular:a FIFO (named pipe)",
        0,
        f"{tmp_path}/pipe: a FIFO (named pipe), not a regular file",
    )


def append_after_hashing(monkeypatch, path, extra: bytes) -> None:
    """Append `extra` to `path` once, right after ingest first hashes it (the moment a
    writer still appending to a file would add its next record)."""
    digest = ingest_paths.file_digest
    appended = []

    def hash_then_append(target):
        out = digest(target)
        if target == path and not appended:
            appended.append(True)
            with path.open("ab") as handle:
                handle.write(extra)
        return out

    monkeypatch.setattr(ingest_paths, "file_digest", hash_then_append)


def test_a_file_appended_to_after_hashing_gets_the_row_of_the_bytes_read(tmp_path, monkeypatch):
    rows = [
        json.dumps({"id": f"r{i}", "venue": "ICLR", "year": 2024, "abstract": "word " * 30})
        for i in range(3)
    ]
    path = write(tmp_path / "raw" / "growing.jsonl", rows[0] + "\n" + rows[1] + "\n")
    append_after_hashing(monkeypatch, path, (rows[2] + "\n").encode())
    result = ingest.ingest([tmp_path / "raw"], cache_dir=tmp_path / "cache")
    row = result.sources.row(0, named=True)
    whole = path.read_bytes()
    assert (row["sha256"], row["bytes"]) == (hashlib.sha256(whole).hexdigest(), len(whole))
    assert (row["records_seen"], row["accepted"]) == (3, 3)
    assert result.records["source_sha256"].unique().to_list() == [row["sha256"]]
    assert row["warning"] == (
        f"the file changed while this run read it ({len(whole) - len(rows[2]) - 1:,} bytes "
        f"when hashed, {len(whole):,} read): its sha256 and bytes are those of the bytes read"
    )
    monkeypatch.undo()
    # The next run finds the parse of what was read under its hash, and nothing changed.
    again = ingest.ingest([tmp_path / "raw"], cache_dir=tmp_path / "cache")
    cached = again.sources.row(0, named=True)
    assert again.files[0].cached
    assert (cached["sha256"], cached["bytes"], cached["warning"]) == (
        row["sha256"],
        len(whole),
        None,
    )
    assert again.records["external_id"].to_list() == ["r0", "r1", "r2"]


def test_a_parquet_file_rewritten_after_hashing_is_read_again(tmp_path, monkeypatch):
    path = tmp_path / "raw" / "papers.parquet"
    path.parent.mkdir()
    old = pl.DataFrame({"id": ["a"], "abstract": ["old " * 30]})
    new = pl.DataFrame({"id": ["b", "c"], "abstract": ["new " * 30, "newer " * 30]})
    old.write_parquet(path)
    digest = ingest_paths.file_digest
    written = []

    def hash_then_rewrite(target):
        out = digest(target)
        if target == path and not written:
            written.append(True)
            new.write_parquet(path)
        return out

    monkeypatch.setattr(ingest_paths, "file_digest", hash_then_rewrite)
    result = ingest.ingest([tmp_path / "raw"])
    row = result.sources.row(0, named=True)
    assert row["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert result.records["external_id"].to_list() == ["b", "c"]
    assert "the file changed while this run read it" in row["warning"]


def test_a_run_publishes_a_folder_with_an_odd_name_a_fifo_and_a_linked_folder(
    prefect_server, tmp_path
):
    raw, other = tmp_path / "raw", tmp_path / "other"
    odd_name_folder(raw)
    write(other / SAMPLE_2.name, SAMPLE_2.read_text())
    (raw / "linked").symlink_to(other)
    os.mkfifo(raw / "pipe.txt")
    warehouse = tmp_path / "warehouse"
    summary = paperlake(raw=[str(raw)], warehouse=str(warehouse))
    assert (summary.status, summary.papers) == ("published", 38)
    with open_lake(Settings(warehouse=warehouse)) as con:
        sources = con.execute("select path, format, accepted from sources order by path").fetchall()
    assert sources == [
        (f"{raw}/linked/{SAMPLE_2.name}", "blocks", 19),
        (f"{raw}/pipe.txt", "not_regular", 0),
        (f"{raw}/sub\\xff/caf\\xe9.txt", "blocks", 19),
    ]
