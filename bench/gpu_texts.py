"""Real-length abstracts for bench/gpu_check.sh: the shared corpora's papers, cleaned as
ingest cleans them, recombined sentence by sentence into N texts whose lengths follow the
real ones, written xz-compressed (one text a line) for a machine without the corpora.

    python bench/gpu_texts.py OUT.xz [--n 100000]     build (needs polars: here, not there)
    load(OUT.xz)                                       read back (stdlib only: there)
"""

from __future__ import annotations

import argparse
import csv
import json
import lzma
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"
SOURCES = {  # file under CORPORA: its title and abstract fields
    "arxiv/arxiv-metadata-oai-snapshot.json": ("title", "abstract"),
    "openreview/ICLR17_submissions.csv": ("Title", "Abstract"),
    "pubmed/pubmed_abstracts.csv": ("title", "abstract"),
}
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
MIN_WORDS = 20  # shorter abstracts are rejected by ingest's default too


def raw_records(corpora: Path) -> list[dict[str, str]]:
    """Title and abstract of every record of the shared corpora."""
    records = []
    for name, (title, abstract) in SOURCES.items():
        path = corpora / name
        with path.open(encoding="utf-8", newline="") as handle:
            rows = (json.loads(line) for line in handle) if path.suffix == ".json" else (
                csv.DictReader(handle)
            )  # fmt: skip
            records += [{"title": r.get(title) or "", "abstract": r.get(abstract) or ""}
                        for r in rows]  # fmt: skip
    return records


def real_texts(corpora: Path = CORPORA) -> list[str]:
    """The text paperlake embeds for each real paper (title. abstract), cleaned by ingest's
    own expressions; abstracts under MIN_WORDS words left out."""
    import polars as pl

    sys.path.insert(0, str(ROOT))
    from flows.embed.papers import paper_text
    from flows.ingest import clean_text

    frame = pl.DataFrame(raw_records(corpora)).select(
        title=clean_text("title"), abstract=clean_text("abstract")
    )
    frame = frame.filter(pl.col("abstract").str.split(" ").list.len() >= MIN_WORDS)
    return paper_text(frame).to_list()


def recombined(texts: list[str], n: int, seed: int = 0) -> list[str]:
    """n distinct texts, each as long (in characters) as a real text drawn at random, made
    of a real title and real sentences drawn from every abstract."""
    rng = random.Random(seed)
    split = [t.split(". ", 1) if ". " in t else ["", t] for t in texts]
    titles = [title for title, _ in split if title]
    pool = [s for _, abstract in split for s in SENTENCE_END.split(abstract) if s]
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        target = len(rng.choice(texts))
        text = rng.choice(titles) + "."
        while len(text) < target:
            sentence = rng.choice(pool)
            if len(text) + len(sentence) - target > target - len(text):
                break  # closer to the real length without it
            text += " " + sentence
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def write(path: Path, texts: list[str]) -> None:
    """One text a line, xz-compressed (its dictionary holds the whole sentence pool, so
    recombined texts cost little)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(path, "wt", encoding="utf-8", preset=6) as handle:
        handle.write("\n".join(texts))


def load(path: Path, n: int | None = None) -> list[str]:
    """The texts `write` wrote, the first `n` of them where given."""
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        texts = handle.read().split("\n")
    return texts[:n] if n is not None else texts


def quantiles(texts: list[str]) -> dict[str, int]:
    lengths = sorted(len(t) for t in texts)
    return {f"p{q}": lengths[min(len(lengths) - 1, len(lengths) * q // 100)] for q in (10, 50, 90)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--n", type=int, default=100_000)
    args = parser.parse_args()
    real = real_texts()
    texts = recombined(real, args.n)
    write(args.out, texts)
    summary = {
        "real_texts": len(real),
        "written": len(texts),
        "chars_real": quantiles(real),
        "chars_written": quantiles(texts),
        "raw_mib": round(sum(len(t.encode()) + 1 for t in texts) / 2**20, 1),
        "xz_mib": round(args.out.stat().st_size / 2**20, 2),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
