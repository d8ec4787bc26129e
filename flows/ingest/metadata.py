"""A file's venue and year: from its header line, its settings, its path or its format."""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from flows.core.settings import SQL_DIR
from flows.ingest.model import SETTINGS_FILE, FileOverride, SourceFile

SEEDS_DIR = SQL_DIR / "seeds"

HEADER_RE = re.compile(
    r"^\s*(?P<venue>[A-Za-z][\w&.+\- ]*?)\s+(?P<year>(?:19|20)\d{2})"
    r"(?:\s+(?:papers|abstracts|submissions|accepted papers))?\s*:?\s*$",
    re.IGNORECASE,
)
# Venue and year at the start of a file name: ICLR17_submissions.csv, neurips-2024.jsonl.
NAME_RE = re.compile(
    r"^(?P<venue>[A-Za-z][A-Za-z&+]*?)[-_ ]?(?P<year>(?:19|20)\d{2}|\d{2})(?=$|[-_ .])"
)


def parse_header(line: str) -> tuple[str, int] | None:
    """Venue and year from a header line such as "ICLR 2026 Papers"; None if it is not one."""
    if len(line) > 120:  # checked first: the pattern is slow on long lines
        return None
    match = HEADER_RE.match(line)
    if not match:
        return None
    return match.group("venue").strip(), int(match.group("year"))


@lru_cache(maxsize=1)
def known_venues() -> dict[str, str]:
    """Venue names as written in sql/seeds/venues.csv, by their casefolded spelling."""
    with (SEEDS_DIR / "venues.csv").open(encoding="utf-8") as handle:
        return {row["venue"].casefold(): row["venue"] for row in csv.DictReader(handle)}


def venue_from_name(name: str) -> tuple[str, int] | None:
    """Venue and year from a file or folder name: ICLR17_submissions.csv, iclr_2024,
    NeurIPS2023-OpenReviewData, acl-2025-long.jsonl.

    A known venue (sql/seeds/venues.csv) is spelled as listed; a two-digit year is taken
    only after a known venue, so that names such as run01/ or v12.csv say nothing.
    """
    match = NAME_RE.match(name)
    if not match:
        return None
    venue, year = match.group("venue"), int(match.group("year"))
    known = known_venues().get(venue.casefold())
    if year < 100:  # two-digit years: 17 is 2017, 98 is 1998
        if known is None:
            return None
        year += 2000 if year <= 69 else 1900
    return known or venue, year


def metadata_from_path(parts: Sequence[str]) -> tuple[str | None, int | None, str | None]:
    """Venue and year from the components of a path, the file name first, then its folders
    (see `_metadata_from_path`)."""
    return _metadata_from_path(tuple(parts))


@lru_cache(maxsize=4096)  # a file's path is asked about several times a run
def _metadata_from_path(parts: tuple[str, ...]) -> tuple[str | None, int | None, str | None]:
    """Venue and year from the components of a path, the file name first, then its folders.

    A component may give both (ICML18_paper.csv, NeurIPS2023-OpenReviewData/) or one: a
    known venue alone (iclr/) or a year alone (2024/). The nearest component wins.

    Returns:
        venue, year, and the components they came from (None where nothing was found).
    """
    venue: str | None = None
    year: int | None = None
    used: list[str] = []
    for part in reversed(parts):
        found_venue, found_year = None, None
        if named := venue_from_name(part):
            found_venue, found_year = named
        elif part.casefold() in known_venues():
            found_venue = known_venues()[part.casefold()]
        elif re.fullmatch(r"(?:19|20)\d{2}", part):
            found_year = int(part)
        if (venue is None and found_venue) or (year is None and found_year):
            used.append(part)
        venue = venue or found_venue
        year = year or found_year
        if venue and year:
            break
    return venue, year, ("/".join(reversed(used)) or None)


def file_metadata(
    header: tuple[str, int] | None,
    override: FileOverride,
    parts: Sequence[str],
    fmt: str,
) -> tuple[str | None, int | None, str | None]:
    """A file's venue and year for records that carry none: from its header line, else its
    settings, else its path (folder and file names), else its format (arXiv).

    Returns:
        venue, year, and where they came from (None where nothing gave them).
    """
    path_venue, path_year, used = metadata_from_path(parts)
    places = (
        ("header line", *(header or (None, None))),
        (SETTINGS_FILE, override.venue, override.year),
        (f"path {used}", path_venue, path_year),
        ("arXiv format", "arXiv" if fmt == "arxiv" else None, None),
    )
    venue = next(((v, where) for where, v, _ in places if v), (None, None))
    year = next(((y, where) for where, _, y in places if y), (None, None))
    if venue[1] == year[1]:
        origin = venue[1]
    else:
        origin = (
            ", ".join(
                f"{what} from {where}"
                for what, (_, where) in (("venue", venue), ("year", year))
                if where
            )
            or None
        )
    return venue[0], year[0], origin


def metadata_warning(source: SourceFile, folder: Path, relative: str) -> str | None:
    """What to tell a user whose file left accepted records without venue or year."""
    missing = [
        (name, count, example)
        for name, count, example in (
            ("venue", source.no_venue, 'venue = "<venue>"'),
            ("year", source.no_year, "year = <year>"),
        )
        if count
    ]
    if not missing:
        return None
    what = " and ".join(f"{count} no {name}" for name, count, _ in missing)
    setting = ", ".join(example for *_, example in missing)
    return (
        f"of {source.accepted} accepted records, {what}; set them in "
        f'{folder / SETTINGS_FILE}: files."{relative}" = {{ {setting} }}'
    )
