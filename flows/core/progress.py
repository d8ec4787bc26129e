"""Progress of the work a person waits for: one live line a stage on a terminal (what is
done of how much, the rate and the time left), and where no terminal watches (a log file,
a scheduled run, a pipe) an INFO line of the run's log every `every` seconds, so Prefect's
logs show it too."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from flows.core.run_record import run_logger

LOG_EVERY = 10.0  # seconds between log lines where no terminal watches

Advance = Callable[[int], None]


def on_terminal() -> bool:
    """Whether a person watches stderr."""
    return sys.stderr.isatty()


@contextmanager
def progress(
    what: str, total: int | None, unit: str, every: float = LOG_EVERY, show: bool = True
) -> Iterator[Advance]:
    """Within it, `advance(n)` says `n` more `unit` of `what` are done.

    On a terminal a live line shows done/total, the rate and the time left; elsewhere a
    log line says the same every `every` seconds, and one more when the work took that
    long. `show` False (a worker's share of the work) says nothing.
    """
    if not show:
        yield lambda n: None
    elif on_terminal():
        with live_line(what, total, unit) as advance:
            yield advance
    else:
        with log_lines(what, total, unit, every) as advance:
            yield advance


@contextmanager
def live_line(what: str, total: int | None, unit: str) -> Iterator[Advance]:
    """A rich progress line on stderr that stays, done, with its time."""
    with Progress(
        TextColumn(f"{what}:"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        RateColumn(),
        TimeRemainingColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    ) as bar:
        task = bar.add_task(what, total=total)
        yield lambda n: bar.advance(task, n)


class RateColumn(ProgressColumn):
    """Units done a second, once there is a rate."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(rate_words(speed) if speed else "", style="progress.data.speed")


def rate_words(rate: float) -> str:
    """Units a second, in digits that say something: 4,368/s, 2.5/s, one every 11 s."""
    if rate >= 10:
        return f"{rate:,.0f}/s"
    if rate >= 0.1:
        return f"{rate:.1f}/s"
    return f"one every {1 / rate:,.0f} s" if rate > 0 else "none yet"


@contextmanager
def log_lines(what: str, total: int | None, unit: str, every: float) -> Iterator[Advance]:
    """INFO lines of the run's log: done/total, rate and time left, every `every` seconds."""
    started = last = time.monotonic()
    done = said = 0

    def say() -> None:
        nonlocal said
        said = done
        seconds = time.monotonic() - started
        rate = done / seconds if seconds > 0 else 0.0
        line = f"{what}: {done:,}" + (f" of {total:,}" if total else "") + f" {unit}"
        line += f" ({rate_words(rate)}"
        if total and rate > 0 and done < total:
            line += f", about {(total - done) / rate:,.0f} s left"
        run_logger().info(line + ")")

    def advance(n: int) -> None:
        nonlocal done, last
        done += n
        if time.monotonic() - last >= every:
            last = time.monotonic()
            say()

    yield advance
    if time.monotonic() - started >= every and done != said:  # the last count, once
        say()
