"""Damage told apart from locks, named in one line, checked and mended by paperlake doctor."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.core.errors import CatalogDamaged
from flows.core.lake import open_lake, published_versions
from flows.core.settings import Settings
from flows.publish import doctor, history


def cli(*args) -> subprocess.CompletedProcess:
    """paperlake in a subprocess, against the session's Prefect API."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value() or ""}
    command = [sys.executable, "-m", "flows.cli", *map(str, args)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def said(result) -> str:
    """A command's output as one line (the console wraps it at the terminal's width)."""
    return " ".join(result.output.split())


@pytest.fixture
def copy(sample_run, tmp_path) -> Settings:
    target = tmp_path / "warehouse"
    shutil.copytree(sample_run.settings.warehouse, target)
    return Settings(warehouse=target, raw=sample_run.settings.raw)


def garble(path, at: int, size: int = 4096) -> None:
    data = bytearray(path.read_bytes())
    data[at : at + size] = os.urandom(size)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    ["header garbled", "blocks garbled", "truncated", "not a database"],
)
def test_a_damaged_catalog_is_told_apart_from_a_lock_at_once(copy, damage):
    catalog = copy.catalog_path
    if damage == "header garbled":
        garble(catalog, 0)
    elif damage == "blocks garbled":
        for at in range(64 << 10, catalog.stat().st_size, 32 << 10):
            garble(catalog, at, 512)
    elif damage == "truncated":
        catalog.write_bytes(catalog.read_bytes()[:100_000])
    else:
        catalog.write_text("hello")
    started = time.monotonic()
    with (
        pytest.raises(CatalogDamaged, match="is damaged .*restore it from a backup"),
        open_lake(copy) as con,
    ):
        con.execute("select count(*) from papers, topics, neighbors").fetchone()
    assert time.monotonic() - started < 10  # never the 60 s wait for a lock
    for command in (["versions"], ["query", "select count(*) from papers"], ["doctor"]):
        shown = CliRunner().invoke(app, [*command, "-w", str(copy.warehouse)])
        assert shown.exit_code == 1, command
        assert "damaged" in said(shown) and "Traceback" not in shown.output, command


def test_a_missing_data_file_is_named_then_mended_by_doctor(prefect_server, copy):
    before = history.checksums(copy)
    (lost,) = [p for p in (copy.warehouse / "data" / "main" / "topics").glob("*.parquet")]
    lost.unlink()
    for command in (["checksum"], ["search", "diffusion language models", "-k", "1"]):
        shown = CliRunner().invoke(app, [*command, "-w", str(copy.warehouse)])
        assert shown.exit_code == 1 and "Traceback" not in shown.output, command
        assert f"{lost.name} is missing: run `paperlake doctor`" in said(shown), command

    # A forced run, in its own process as a user starts it: one line, no traceback logged.
    forced = cli("run", "--raw", copy.raw[0], "--force", "-w", copy.warehouse)
    assert forced.returncode == 1
    assert f"{lost.name} is missing: run `paperlake doctor`" in " ".join(forced.stderr.split())
    assert "Traceback" not in forced.stderr + forced.stdout

    up = doctor.check_warehouse(copy)
    assert [(f.kind, f.table, f.versions, f.problem) for f in up.findings] == [
        ("data file", "topics", (1,), "missing")
    ]
    shown = CliRunner().invoke(app, ["doctor", "-w", str(copy.warehouse)])
    assert shown.exit_code == 1 and "doctor --repair" in said(shown)

    shown = CliRunner().invoke(app, ["doctor", "--repair", "-w", str(copy.warehouse)])
    assert shown.exit_code == 0, shown.output
    text = said(shown)
    assert "salvaged topics: 0 rows kept from its readable files, 4 dropped" in text
    # The salvage is a catalog commit (snapshot 2), not a version: the rebuild is version 3.
    assert "version 3 of" in text and "repaired: the latest version (version 3)" in text
    assert "lost: topics at version 1 cannot be read" in text
    # The rebuilt version holds what version 1 held; version 1's topics stay lost.
    _, tables, _ = history.checksums(copy)
    assert tables == before[1]
    with open_lake(copy) as con:
        assert published_versions(con) == [1, 3]
    again = CliRunner().invoke(app, ["doctor", "-w", str(copy.warehouse)])
    assert again.exit_code == 0 and "lost: topics at version 1" in said(again)


LATER = (
    "ICLR 2026 Papers\n\nTabular foundation models pre-trained on synthetic tables classify "
    "small real datasets in one forward pass; we show where they fail on wide tables and "
    "propose a fix.\n"
)


def topic_sizes(settings: Settings) -> list[int]:
    with open_lake(settings) as con:
        rows = con.execute("select count(*) from paper_topics group by topic_id").fetchall()
    return sorted(n for (n,) in rows)


def test_a_lost_topics_delete_file_refits_topics_and_drops_none(prefect_server, raw_copy, tmp_path):
    """A second run updates some topics in place (a delete file); with that file lost, the
    salvage keeps some topic rows only: the rebuild fits topics afresh rather than carry
    the survivors over, so every paper has its topic as a fresh build gives it."""
    from flows.pipeline import paperlake

    settings = Settings(warehouse=tmp_path / "warehouse", raw=(raw_copy,))
    paperlake(raw=[str(raw_copy)], warehouse=str(settings.warehouse))
    (raw_copy / "later.txt").write_text(LATER)
    paperlake(raw=[str(raw_copy)], warehouse=str(settings.warehouse))
    (deletes,) = (settings.warehouse / "data" / "main" / "topics").glob("*-delete.parquet")
    deletes.unlink()

    shown = CliRunner().invoke(app, ["doctor", "--repair", "-w", str(settings.warehouse)])
    assert shown.exit_code == 0, shown.output
    text = said(shown)
    assert "topics lost rows in the salvage: they are fit afresh" in text
    assert "repaired: the latest version (version 4) reads whole" in text
    fresh = Settings(warehouse=tmp_path / "fresh", raw=(raw_copy,))
    paperlake(raw=[str(raw_copy)], warehouse=str(fresh.warehouse))
    assert topic_sizes(settings) == topic_sizes(fresh)
    assert sum(topic_sizes(settings)) == 39  # every paper, the later one too
    with open_lake(settings) as con:
        orphans = (
            "select count(*) from paper_topics where topic_id not in (select topic_id from topics)"
        )
        assert con.execute(orphans).fetchone() == (0,)


def test_doctor_finds_damaged_caches_and_repair_drops_them(copy):
    (part,) = (copy.warehouse / "cache" / "neighbors").glob("lists-*/lists.parquet")
    garble(part, 100, 64)
    leftover = copy.warehouse / "cache" / "embeddings" / "x.123.tmp"
    leftover.write_text("a killed run's")
    up = doctor.check_warehouse(copy)
    assert sorted((f.kind, f.path) for f in up.findings) == [
        ("cache", str(part)),
        ("leftover", str(leftover)),
    ]
    shown = CliRunner().invoke(app, ["doctor", "--repair", "-w", str(copy.warehouse)])
    assert shown.exit_code == 0, shown.output
    assert not part.exists() and not leftover.exists()
    assert doctor.check_warehouse(copy).findings == []
    healthy = CliRunner().invoke(app, ["doctor", "-w", str(copy.warehouse)])
    assert healthy.exit_code == 0 and "healthy: the catalog," in said(healthy)


def test_a_write_that_fails_after_the_commit_leaves_the_version_published(prefect_server, copy):
    """The page a run writes after its commit cannot be written (a folder where it goes, as
    a full disk refuses it): the version is published, the run says so and warns."""
    (copy.warehouse / "dq-v2.html").mkdir()
    extra = copy.warehouse.parent / "extra.txt"
    extra.write_text(
        "ICLR 2026 Papers\n\nWe show that a retrieval benchmark for chemistry questions rewards "
        "grounded readers: cited evidence from patents beats closed-book models by twelve points."
    )
    shown = CliRunner().invoke(
        app, ["run", "--raw", str(copy.raw[0]), "--raw", str(extra), "-w", str(copy.warehouse)]
    )
    text = said(shown)
    assert shown.exit_code == 0, shown.output
    assert "version 2 of" in text and "published" in text
    assert "warning: version 2 is published, but its data-quality page was not written" in text
    assert "previous version stays current" not in text
    with open_lake(copy) as con:
        assert published_versions(con) == [1, 2]
    (copy.warehouse / "dq-v2.html").rmdir()
    page = CliRunner().invoke(app, ["dq", "-w", str(copy.warehouse)])
    assert page.exit_code == 0 and (copy.warehouse / "dq-v2.html").is_file()
