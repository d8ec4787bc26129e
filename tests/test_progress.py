"""Progress where a person waits: log lines where no terminal watches, with done, total,
rate and time left."""

from __future__ import annotations

import logging
import re

from flows.core import progress as progress_module
from flows.core.progress import progress, rate_words


def test_without_a_terminal_progress_is_logged_with_rate_and_time_left(caplog, monkeypatch):
    monkeypatch.setattr(progress_module, "on_terminal", lambda: False)
    with (
        caplog.at_level(logging.INFO, logger="paperlake"),
        progress("embed", 300, "texts", every=0.0) as advance,
    ):
        advance(100)
        advance(200)
    lines = [r.getMessage() for r in caplog.records if r.name == "paperlake"]
    assert re.fullmatch(r"embed: 100 of 300 texts \([\d,]+/s, about [\d,]+ s left\)", lines[0])
    assert re.fullmatch(r"embed: 300 of 300 texts \([\d,]+/s\)", lines[1])


def test_work_shorter_than_the_interval_logs_nothing(caplog, monkeypatch):
    monkeypatch.setattr(progress_module, "on_terminal", lambda: False)
    with (
        caplog.at_level(logging.INFO, logger="paperlake"),
        progress("ingest", None, "files read") as advance,
    ):
        advance(3)
    assert [r for r in caplog.records if r.name == "paperlake"] == []


def test_a_workers_share_says_nothing(caplog):
    with caplog.at_level(logging.INFO), progress("embed", 5, "texts", 0.0, show=False) as advance:
        advance(5)
    assert caplog.records == []


def test_slow_work_keeps_its_rate_in_digits_that_say_something():
    # One big file read in 11.7 s was logged as "1 files read (0/s)".
    assert rate_words(4368.2) == "4,368/s"
    assert rate_words(2.54) == "2.5/s"
    assert rate_words(1 / 11.7) == "one every 12 s"
    assert rate_words(0.0) == "none yet"


def test_the_last_count_is_logged_once(caplog, monkeypatch):
    # One big file: its one advance came after the interval and was logged; leaving the
    # progress logged the same line again.
    monkeypatch.setattr(progress_module, "on_terminal", lambda: False)
    with (
        caplog.at_level(logging.INFO, logger="paperlake"),
        progress("ingest", None, "files read", every=0.0) as advance,
    ):
        advance(1)
    lines = [r.getMessage() for r in caplog.records if r.name == "paperlake"]
    assert len(lines) == 1 and lines[0].startswith("ingest: 1 files read (")
