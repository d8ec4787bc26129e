"""`paperlake search` with an explorer of the warehouse running: the query is handed to it
(flows/core/explorers.py), and what the command prints is what it prints on its own."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from flows.core import explorers
from flows.core.settings import PROJECT_ROOT, Settings
from tests.conftest import explorer_process

SEARCHES = [
    ["speculative decoding", "--format", "jsonl"],
    ["speculative decoding", "--mode", "keyword", "-k", "3", "--format", "csv"],
    ["diffusion models", "--mode", "dense", "-k", "4", "--topic", "1", "--format", "jsonl"],
    ["graph neural networks for molecules"],  # no good match: the line after the table
    ["reward models", "--fusion", "rrf", "--min-cosine", "0.2", "--format", "jsonl"],
    ["chain of thought", "--topic", "no such topic words"],  # refused, the same words
    ["chain of thought", "--version", "9"],  # refused: no such version
]


@pytest.fixture(scope="module")
def warehouse(sample_run, tmp_path_factory):
    """A copy of the sample warehouse, so that the explorer's note stays in it."""
    copy = tmp_path_factory.mktemp("handover") / "warehouse"
    shutil.copytree(sample_run.settings.warehouse, copy)
    return copy


def search(warehouse, args: list[str], *python: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *python, "-m", "flows.cli", "search", *args, "-w", str(warehouse)],
        capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=180,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "COLUMNS": "200"},
    )  # fmt: skip


def said(result: subprocess.CompletedProcess) -> tuple[int, str, str]:
    return result.returncode, result.stdout, result.stderr


def test_search_hands_its_query_to_a_running_explorer_and_prints_the_same(warehouse):
    alone = [said(search(warehouse, args)) for args in SEARCHES]
    assert [code for code, _, _ in alone] == [0, 0, 0, 0, 0, 1, 1]
    assert "no good match" in alone[3][1] and "no topic matches" in alone[5][2]
    with explorer_process(warehouse) as (base, process):
        [note] = (warehouse / "cache" / explorers.FOLDER).glob("*.json")
        assert json.loads(note.read_text())["url"] == base
        assert explorers.running(Settings(warehouse=warehouse)) == base
        # Another model is not this explorer's: that search would run on its own.
        assert explorers.running(Settings(warehouse=warehouse, model="other-model")) is None
        handed = [said(search(warehouse, args)) for args in SEARCHES]
        timed = search(warehouse, SEARCHES[0], "-X", "importtime")
        process.send_signal(signal.SIGINT)  # Ctrl-C
        assert process.wait(timeout=30) == 0
    assert not note.exists()  # the explorer took its note with it
    assert handed == alone
    imported = {line.rsplit("|", 1)[-1].strip() for line in timed.stderr.splitlines()}
    assert "polars" in imported  # the hits it printed
    heavy = ("duckdb", "torch", "pandas", "onnxruntime", "openvino", "tokenizers")
    assert not [name for name in imported if name.startswith(heavy)]


def left_note(warehouse, pid: int):
    """The note an explorer of process `pid` would leave, its address where none listens."""
    note = warehouse / "cache" / explorers.FOLDER / f"{pid}.json"
    note.parent.mkdir(parents=True, exist_ok=True)
    fields = explorers.identity(Settings(warehouse=warehouse))
    note.write_text(json.dumps({"url": "http://127.0.0.1:9/", "pid": pid, **fields}))
    return note


def test_a_note_left_by_an_explorer_that_is_gone_is_removed_and_search_runs_alone(warehouse):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    note = left_note(warehouse, gone.pid)
    result = search(warehouse, SEARCHES[0])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[0])["rank"] == 1
    assert not note.exists()


def test_an_explorer_that_does_not_answer_leaves_the_search_to_the_command(warehouse):
    # A live process whose note points at a port where nothing listens.
    note = left_note(warehouse, os.getpid())
    try:
        result = search(warehouse, SEARCHES[0])
    finally:
        note.unlink()
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[0])["rank"] == 1
