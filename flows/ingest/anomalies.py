"""A file's anomalies, told from character statistics of its accepted records: a letter far
rarer than in any European language (a scrape that lost one letter from every abstract:
"We roose to tackle the roblem"), mojibake (UTF-8 read as Latin-1 or cp1252: "Ã©" for
"é", "â€™" for "’"), and HTML entities escaped twice or more (`&amp;amp;`). The records
that show one are flagged; the file's sources row gets a warning line.

Counts are polars expressions over each batch of a file's records (its letters over the
batch's first SAMPLE_RECORDS), added up as the file is read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import polars as pl

# Letters and their share of the letters of English text; each is common enough in the
# other languages abstracts are written in (German, French, Spanish, Italian, ...) that
# a tenth of this share is far below any of them (h, w, y and k are not).
LETTER_SHARES = {
    "e": 0.127, "t": 0.091, "a": 0.082, "o": 0.075, "i": 0.070, "n": 0.067, "s": 0.063,
    "r": 0.060, "d": 0.043, "l": 0.040, "c": 0.028, "u": 0.028, "m": 0.024, "f": 0.022,
    "g": 0.020, "p": 0.019, "b": 0.015, "v": 0.010,
}  # fmt: skip
FAR_BELOW = 0.1
# A batch's letters are counted over its first records only: shares settle long before.
SAMPLE_RECORDS = 5_000
# A letter's absence means something where this many of it were to be expected: in a
# file, before it is warned about; in a record, before it is flagged.
FILE_EXPECTED = 50
RECORD_EXPECTED = 3
# UTF-8 read as Latin-1 or cp1252: a lead byte's letter (Â Ã Ä Å, â) followed by what a
# continuation byte reads as (U+0080-U+00BF, or cp1252's €‚ƒ„…†‡ˆ‰Š‹ŒŽ‘’“”•–—˜™š›œžŸ).
_CONTINUATION = (
    r"[\x{80}-\x{BF}\x{152}\x{153}\x{160}\x{161}\x{178}\x{17D}\x{17E}\x{192}\x{2C6}\x{2DC}"
    r"\x{2013}\x{2014}\x{2018}-\x{201A}\x{201C}-\x{201E}\x{2020}-\x{2022}\x{2026}\x{2030}"
    r"\x{2039}\x{203A}\x{20AC}\x{2122}]"
)
MOJIBAKE_RE = (
    rf"[\x{{C2}}-\x{{C5}}]{_CONTINUATION}|\x{{E2}}[\x{{80}}\x{{20AC}}\x{{201A}}]{_CONTINUATION}"
)
# An entity escaped again: &amp;amp; &amp;#39; &amp;quot;
ESCAPED_TWICE_RE = r"&amp;(?:#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});"


@dataclass
class FileCounts:
    """What one file's records showed so far."""

    letters: int = 0
    counts: Counter = field(default_factory=Counter)
    flagged: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, letters: dict[str, int]) -> None:
        """Add a sample's `letter_counts`."""
        letters = dict(letters)
        self.letters += letters.pop("_letters")
        self.counts.update(letters)

    def lost_letters(self) -> list[str]:
        """Letters far below their share across the file so far."""
        return [
            c
            for c, share in LETTER_SHARES.items()
            if share * self.letters >= FILE_EXPECTED
            and self.counts[c] <= FAR_BELOW * share * self.letters
        ]


def letter_counts(abstracts: pl.Series) -> dict[str, int]:
    """The letters of a sample of abstracts once lower-cased: a to z (`_letters`), and each
    letter of LETTER_SHARES.

    Counted as bytes of their UTF-8 (no other character's bytes are ASCII): a pass over
    the text, where a regular expression a letter took one pass each.
    """
    lower = abstracts.str.to_lowercase().drop_nulls()
    data = "".join(lower.to_list()).encode("utf-8")
    counts = np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256)
    found = {"_letters": int(counts[ord("a") : ord("z") + 1].sum())}
    return found | {c: int(counts[ord(c)]) for c in LETTER_SHARES}


def missing_letter_flags(lost: Mapping[str, pl.Expr]) -> list[pl.Expr]:
    """The missing_letter:<c> flag of each letter `c` of `lost` (in the order of
    LETTER_SHARES), for the records where `lost[c]` holds (their file lost `c`) and the
    letter is absent where their length expects it; the frame needs `_letters` (see
    `with_letters`)."""
    lower = pl.col("abstract").str.to_lowercase()
    flags = []
    for c in (c for c in LETTER_SHARES if c in lost):
        expected = pl.col("_letters") * LETTER_SHARES[c]
        gone = (
            lost[c]
            & (expected >= RECORD_EXPECTED)
            & (lower.str.count_matches(c, literal=True) <= FAR_BELOW * expected)
        )
        name = f"missing_letter:{c}"
        flags.append(pl.when(gone & ~pl.col("flags").list.contains(name)).then(pl.lit(name)))
    return flags


def with_letters(records: pl.DataFrame) -> pl.DataFrame:
    """`records` with `_letters`, the letters of each abstract."""
    return records.with_columns(
        _letters=pl.col("abstract").str.to_lowercase().str.count_matches("[a-z]")
    )


class CharacterStats:
    """The character statistics of files' accepted records, file by file (a frame may hold
    several files' records; a file's records may come in several frames): `flag` adds the
    flags of a frame, `warning` says what a file showed.

    Without `letters`, letters are neither counted nor flagged (a chunk of a file, whose
    letters are told once all its chunks are read).
    """

    def __init__(self, letters: bool = True):
        self.files: dict[str, FileCounts] = {}
        self.letters = letters

    def flag(self, accepted: pl.DataFrame) -> pl.DataFrame:
        """`accepted` with flags for what its records show: missing_letter:<c> (a letter
        their file lost, absent where a record's length expects it), mojibake and
        html_entities (escaped twice)."""
        if accepted.height == 0:
            return accepted
        raw = pl.concat_str(pl.col("title_raw").fill_null(""), pl.col("abstract_raw").fill_null(""))
        out = accepted.with_columns(
            _mojibake=raw.str.extract(f"({MOJIBAKE_RE})", 1),
            _twice=raw.str.extract(f"({ESCAPED_TWICE_RE})", 1),
        )
        self._count(out)
        flags = [
            pl.when(pl.col("_mojibake").is_not_null()).then(pl.lit("mojibake")),
            pl.when(pl.col("_twice").is_not_null()).then(pl.lit("html_entities")),
        ]
        lost: dict[str, list[str]] = {}  # letter -> files that lost it
        for path, counts in self.files.items():
            for c in counts.lost_letters():
                lost.setdefault(c, []).append(path)
        if lost:
            out = with_letters(out)
            flags += missing_letter_flags(
                {c: pl.col("source_path").is_in(paths) for c, paths in lost.items()}
            )
        out = out.with_columns(
            flags=pl.col("flags").list.concat(pl.concat_list(flags).list.drop_nulls())
        )
        return out.drop("_mojibake", "_twice", "_letters", strict=False)

    def _count(self, records: pl.DataFrame) -> None:
        """Add up each file's letters (over its first SAMPLE_RECORDS records of the frame),
        mojibake and entities escaped twice, with an example of each."""
        first = pl.int_range(pl.len()).over("source_path") < SAMPLE_RECORDS
        sample = records.filter(first) if self.letters else records.clear()
        for (path,), frame in sample.partition_by(
            "source_path", as_dict=True, maintain_order=True
        ).items():
            self.files.setdefault(path, FileCounts()).add(letter_counts(frame["abstract"]))
        found = records.group_by("source_path", maintain_order=True).agg(
            mojibake=pl.col("_mojibake").drop_nulls(),
            html_entities=pl.col("_twice").drop_nulls(),
        )
        for row in found.iter_rows(named=True):
            counts = self.files.setdefault(row["source_path"], FileCounts())
            for name in ("mojibake", "html_entities"):
                counts.flagged[name] += len(row[name])
                if row[name]:
                    counts.examples.setdefault(name, row[name][0])

    def warning(self, path: str, flag_counts: dict[str, int]) -> str | None:
        """What the file at `path` showed, one clause each; None where nothing."""
        counts = self.files.get(path, FileCounts())
        notes = []
        for c in counts.lost_letters():
            notes.append(
                f"'{c}' is {counts.counts[c] / counts.letters:.2%} of its letters where text "
                f"has about {LETTER_SHARES[c]:.1%} (a letter lost in export?): "
                f"{_records(flag_counts.get(f'missing_letter:{c}', 0))} flagged missing_letter:{c}"
            )
        if n := counts.flagged["mojibake"]:
            notes.append(
                f"mojibake such as {counts.examples['mojibake']!r} (UTF-8 read as Latin-1 or "
                f"cp1252): {_records(n)} flagged mojibake"
            )
        if n := counts.flagged["html_entities"]:
            notes.append(
                f"HTML entities escaped twice such as {counts.examples['html_entities']!r} "
                f"(decoded): {_records(n)} flagged html_entities"
            )
        if n := flag_counts.get("withdrawn"):
            notes.append(f"withdrawal notices, not abstracts: {_records(n)} flagged withdrawn")
        return "; ".join(notes) or None


def _records(n: int) -> str:
    return f"{n:,} record" + ("" if n == 1 else "s")
