"""A deterministic benchmark corpus: real sentences from data/raw recombined into abstracts."""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "raw"


def sentences() -> list[str]:
    """Every sentence of the sample abstracts, in file order."""
    out: list[str] = []
    for path in sorted(SAMPLE.glob("*.txt")):
        blocks = path.read_text(encoding="utf-8").split("\n\n")[1:]
        for block in blocks:
            out.extend(s.strip() for s in re.split(r"(?<=[.!?])\s+", block) if len(s.split()) > 3)
    return out


def stream(seed: int = 0) -> Iterator[str]:
    """Distinct abstracts of 5-9 sentences, one after another, without end; the same
    stream for the same seed. Only an 8-byte digest of each is kept, so a million cost
    tens of MB to tell apart."""
    pool = sentences()
    rng = random.Random(seed)
    seen: set[bytes] = set()
    while True:
        text = " ".join(rng.sample(pool, rng.randint(5, 9)))
        digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
        if digest not in seen:
            seen.add(digest)
            yield text


def abstracts(n: int, seed: int = 0, offset: int = 0) -> list[str]:
    """n distinct abstracts of 5-9 sentences; `offset` shifts the stream for new ones."""
    return list(itertools.islice(stream(seed), offset, offset + n))


CATEGORIES = (
    "cs.LG",
    "cs.CL",
    "cs.CV",
    "stat.ML",
    "cs.AI",
    "math.OC",
    "q-bio.NC",
    "physics.comp-ph",
)
SURNAMES = [
    "Ito",
    "Novak",
    "Okafor",
    "Silva",
    "Chen",
    "Kowalski",
    "Haddad",
    "Lindqvist",
    "Moreau",
    "Petrov",
    "Tanaka",
]


def arxiv_record(number: int, text: str) -> dict:
    """An arXiv metadata snapshot line (the keys paperlake reads) for abstract `text`:
    a title from its first words, two to four authors and a category drawn from `number`."""
    rng = random.Random(number)
    names = [
        f"{chr(65 + rng.randrange(26))}. {rng.choice(SURNAMES)}" for _ in range(rng.randint(2, 4))
    ]
    year = 2007 + number % 19
    return {
        "id": f"{year % 100:02d}{number % 12 + 1:02d}.{number:07d}",
        "authors": ", ".join(names),
        "title": " ".join(text.split()[:9]).rstrip(".,;:"),
        "categories": " ".join(rng.sample(CATEGORIES, rng.randint(1, 2))),
        "abstract": text,
        "update_date": f"{year}-{number % 12 + 1:02d}-{number % 28 + 1:02d}",
        "versions": [{"version": "v1"}],
    }


def write_jsonl(path: Path, texts: Iterable[str], first: int) -> int:
    """`texts` as arXiv metadata lines numbered from `first`, written as they come: how many."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for count, text in enumerate(texts, start=1):
            out.write(json.dumps(arxiv_record(first + count - 1, text)) + "\n")
    return count


def write_dump(path: Path, texts: list[str], header: str = "BENCH 2026 Papers") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "\n\n" + "\n\n".join(texts) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    print(write_dump(args.out, abstracts(args.n)))
