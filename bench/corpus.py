"""A deterministic benchmark corpus: real sentences from data/raw recombined into abstracts."""

from __future__ import annotations

import argparse
import random
import re
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


def abstracts(n: int, seed: int = 0, offset: int = 0) -> list[str]:
    """n distinct abstracts of 5-9 sentences; `offset` shifts the stream for new ones."""
    pool = sentences()
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n + offset:
        text = " ".join(rng.sample(pool, rng.randint(5, 9)))
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out[offset:]


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
