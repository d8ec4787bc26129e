"""A run's data-quality outcome in words: the lines `paperlake run` prints after a run and
the data-quality page opens with. Nothing heavy is imported here: the command of a run
handed to `paperlake serve` prints them without loading the stages."""

from __future__ import annotations

from collections.abc import Sequence


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
