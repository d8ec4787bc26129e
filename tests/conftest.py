"""Shared fixtures: one Prefect test server per session, one sample warehouse per session."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from flows.core.settings import PROJECT_ROOT, Settings, configure_environment

configure_environment()

SAMPLE_RAW = PROJECT_ROOT / "data" / "raw"
SHARED_CORPORA = PROJECT_ROOT.parent / "shared" / "corpora"


@pytest.fixture(scope="session")
def prefect_server():
    """A temporary Prefect API for the whole session (starting one costs several seconds)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@dataclass
class SampleRun:
    settings: Settings
    summary: object


@pytest.fixture(scope="session")
def sample_run(prefect_server, tmp_path_factory) -> SampleRun:
    """The real flow, real model and real DuckLake run once on data/raw."""
    from flows.pipeline import paperlake

    warehouse = tmp_path_factory.mktemp("sample") / "warehouse"
    summary = paperlake(raw=[str(SAMPLE_RAW)], warehouse=str(warehouse))
    return SampleRun(Settings(warehouse=warehouse, raw=(SAMPLE_RAW,)), summary)


@pytest.fixture
def raw_copy(tmp_path) -> Path:
    """A writable copy of data/raw."""
    target = tmp_path / "raw"
    shutil.copytree(SAMPLE_RAW, target)
    return target


def write(path: Path, text: str | bytes) -> Path:
    """Write a fixture file, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def chromium():
    """The system Chromium driven by Playwright (never a downloaded browser)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium to run browser tests")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@dataclass
class OfflinePage:
    """A page opened from a file with every other request refused and noted."""

    page: object
    requests: list[str]  # what the page tried to fetch besides its file
    errors: list[str]  # console errors and uncaught exceptions


def open_offline(browser, path: Path) -> OfflinePage:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    opened = OfflinePage(page, [], [])
    page.on("console", lambda m: opened.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: opened.errors.append(str(exc)))

    def only_the_file(route):
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            opened.requests.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_file)
    page.goto(Path(path).resolve().as_uri(), wait_until="load")
    return opened


@contextmanager
def explorer_process(warehouse: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """`paperlake explore --port 0` on `warehouse` in its own process: its URL and the
    process (killed on leaving where a test has not stopped it)."""
    command = [sys.executable, "-m", "flows.cli", "explore", "-w", str(warehouse),
               "--port", "0"]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=os.environ | {"COLUMNS": "200"},
    )  # fmt: skip
    first = process.stdout.readline()
    found = re.search(r"paperlake explorer: (http://127\.0\.0\.1:\d+/)", first)
    if not found:
        process.kill()
        pytest.fail(f"the explorer did not start: {first}{process.stdout.read()}")
    try:
        yield found.group(1), process
    finally:  # a failed test's too
        if process.poll() is None:
            process.kill()
            process.wait()


def papers_frame(data: dict, **kwargs) -> pl.DataFrame:
    """A papers frame of the given columns with every other column a record has (authors,
    keywords, ...) null, so the SQL of any derived table finds the columns it reads."""
    from flows.ingest.model import RECORD_SCHEMA

    frame = pl.DataFrame(data, **kwargs)
    return frame.with_columns(
        pl.lit(None, dtype=dtype).alias(name)
        for name, dtype in RECORD_SCHEMA.items()
        if name not in frame.columns
    )


# The types of /api/map's columns, as the page names them (its typed arrays).
MAP_TYPES = {"float32": "<f4", "int16": "<i2", "int32": "<i4"}


def read_map(body: bytes) -> dict:
    """/api/map's binary answer read as the page reads it: its head (JSON, after its length
    in 4 bytes), and `points`, its columns, each at its offset past the head."""
    (size,) = struct.unpack_from("<I", body)
    head = json.loads(body[4 : 4 + size])
    points = {}
    for column in head["columns"]:
        start = 4 + size + column["offset"]
        assert start % 8 == 0  # the page reads each column in place, as a typed array
        points[column["name"]] = np.frombuffer(
            body, MAP_TYPES[column["type"]], head["papers"], start
        )
    return head | {"points": points}
