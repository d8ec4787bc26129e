"""Words shared by what a run prints, what `paperlake validate` prints and the data-quality
page: a run's data-quality lines, where its pages are, and a record's place and first
characters. Nothing heavy is imported here: the command of a run handed to `paperlake
serve` prints them without loading the stages."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

SNIPPET_CHARS = 80  # of a rejected record, as listed
DATA_DOCS_NOTE = (
    "Data Docs (Great Expectations; their styles load from a CDN, so they need a network)"
)


def outcome_lines(
    text: str, failures: Sequence[str] = (), warned: Sequence[str] = ()
) -> list[tuple[str, str]]:
    """A run's data-quality lines as (label, text): what `paperlake run` prints after a run
    and what the data-quality page shows, in the same words."""
    return [
        ("data quality", text),
        *(("data-quality failure", line) for line in failures),
        *(("data-quality warning", line) for line in warned),
    ]


def page_lines(dq_page: str | None, data_docs: str | None) -> list[str]:
    """Where a run's data-quality pages are: the offline page first; the Data Docs second,
    saying that they need a network."""
    lines = [f"data-quality page: {dq_page}"] if dq_page else []
    return lines + ([f"{DATA_DOCS_NOTE}: {data_docs}"] if data_docs else [])


def common_root(paths: Sequence[str | None]) -> str:
    """The folder all raw files lie in, so that locations read `file.txt:12`."""
    folders = [os.path.dirname(p) for p in paths if p]
    if not folders:
        return ""
    try:
        return os.path.commonpath(folders)
    except ValueError:  # absolute and relative paths mixed
        return ""


def relative(path: str | None, root: str) -> str | None:
    """`path` below `root`, or as it is where it does not lie there."""
    if path is None:
        return None
    return path[len(root) + 1 :] if root and path.startswith(root + "/") else path


def location(path: str | None, root: str, line: int | None, record_no: int | None = None) -> str:
    """Where a record was read, as a person finds it: `file:line`, else `file record N`."""
    where = relative(path, root) or "?"
    if line is not None:
        return f"{where}:{line}"
    return f"{where} record {record_no}" if record_no is not None else where


def snippet(text: str | None, chars: int = SNIPPET_CHARS) -> str:
    """A record's first `chars` characters on one line: runs of white space as one space,
    a cut shown by "…"."""
    flat = re.sub(r"\s+", " ", text or "").strip()
    return flat if len(flat) <= chars else flat[:chars] + "…"


def peak_line(peaks: dict[str, int] | None) -> str:
    """The run's peak memory (MB) as each stage ended, worded in GB for its summary."""
    shown = "  ".join(f"{k} {v / 1024:.2f}" for k, v in (peaks or {}).items())
    return f"peak memory GB: {shown or 'not measured'}"


def usage_lines(summary) -> list[str]:
    """A run summary's peak memory line and its CPU seconds a stage."""
    cpu = getattr(summary, "stage_cpu_s", None) or {}
    shown = "  ".join(f"{k} {v:.1f}" for k, v in cpu.items())
    return [
        peak_line(getattr(summary, "stage_peak_mb", None)),
        f"cpu seconds: {shown or 'not measured'}",
    ]
