"""Hostile raw exports, built from the sample abstracts: the shapes real exports take.

`python -m tests.hostile DIR` writes the whole folder, for trying `paperlake validate` and
`paperlake run` by hand; the tests call the builders one by one.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import sys
from pathlib import Path

from tests.conftest import SAMPLE_RAW, write

FORUM = "https://openreview.net/forum?id="
OPENREVIEW_HEADER = ["id", "title", "authors", "abstract", "keywords", "decision", "forum"]
WORDS = [
    "sparse",
    "attention",
    "diffusion",
    "policies",
    "graph",
    "transformers",
    "contrastive",
    "learning",
    "protein",
    "language",
    "models",
    "reinforcement",
    "agents",
    "planning",
    "retrieval",
    "calibration",
    "robustness",
    "federated",
    "optimisation",
    "kernels",
    "tokenizers",
    "distillation",
    "scaling",
    "laws",
    "benchmarks",
]
NAMES = [
    "Ada Lovelace",
    "Alan Turing",
    "Grace Hopper",
    "Edsger Dijkstra",
    "Barbara Liskov",
    "Donald Knuth",
    "Frances Allen",
    "John McCarthy",
    "Leslie Lamport",
    "Radia Perlman",
    "Shafi Goldwasser",
]
DECISIONS = ("Accept (Oral)", "Accept (Poster)", "Reject")


def sample_abstracts() -> list[str]:
    """The 38 abstracts of data/raw, as written there (commas, LaTeX, links and all)."""
    out = []
    for path in sorted(SAMPLE_RAW.glob("*.txt")):
        blocks = path.read_text(encoding="utf-8").split("\n\n")[1:]
        out.extend(" ".join(b.split()) for b in blocks if b.strip())
    return out


def openreview_rows(n: int, seed: int = 7) -> list[dict[str, str]]:
    """n distinct OpenReview-like records: titles, author lists and keywords with commas."""
    rng = random.Random(seed)
    abstracts = sample_abstracts()
    rows = []
    for i in range(n):
        words = rng.sample(WORDS, 5)
        title = " ".join(words[:3]).capitalize()
        if rng.random() < 0.5:
            title += f", {words[3]}, and {words[4]}"
        abstract = f"{abstracts[i % len(abstracts)]} Record {i}, in the export."
        rows.append(
            {
                "id": f"or{i:05d}",
                "title": title,
                "authors": ", ".join(rng.sample(NAMES, rng.randint(1, 4))),
                "abstract": abstract,
                "keywords": ", ".join(rng.sample(WORDS, rng.randint(1, 3))),
                "decision": rng.choice(DECISIONS),
                "forum": f"{FORUM}or{i:05d}",
            }
        )
    return rows


def naive_csv(rows: list[dict[str, str]], header: list[str]) -> str:
    """CSV as a hand-written exporter writes it: fields joined by commas, quoted only when
    they hold a quote or a line break, so commas inside fields shift the row."""

    def field(value: str) -> str:
        if '"' in value or "\n" in value:
            return '"' + value.replace('"', '""') + '"'
        return value

    lines = [",".join(header)]
    lines += [",".join(field(row[c]) for c in header) for row in rows]
    return "\n".join(lines) + "\n"


def proper_csv(rows: list[dict[str, str]], header: list[str]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


# How an abstract holds quotes that an exporter wrapped in quotes without doubling: inside,
# at its start or end, next to commas, alone. {w} is a word, {a} a sample abstract.
INNER_QUOTES = (
    'We propose a "so-called" {w} method. {a}',
    '"{W}" is what we call it. {a}',
    '{a} We call this "{w}"',
    '{a} It is "fast", "robust", and "{w}".',
    '"{w}", the method, {a}',
    '{a} A 12" display, then "{w}" again',
    '{a} The "{w}," as they say, works.',
    '{a} It ends with one lone quote "',
    'A "{w}"-based model, "end-to-end", for {a}',
    '{a} (see "{W} et al.", 2023)',
)
# Rows an export breaks in a way no reading can pin down: a quoted title and abstract both
# holding undoubled quotes, an abstract over two lines, quotes that look like a field's end.
UNPINNED = (
    {"title": 'The "{w}" model', "abstract": 'A "{w}" method. {a}'},
    {"abstract": '{a}\nA second line with "{w}" in it.'},
    {"abstract": '{a} Both "{w}","{w}" here.'},
)


def inner_quote_rows(n: int, seed: int = 11, share: float = 0.25) -> list[dict[str, str]]:
    """OpenReview-like records, `share` of them with abstracts holding quotes in the ways
    of INNER_QUOTES (in turn, with a random word)."""
    rng = random.Random(seed)
    rows = openreview_rows(n, seed)
    quoted = sorted(rng.sample(range(n), round(n * share)))
    for turn, i in enumerate(quoted):
        word = rng.choice(WORDS)
        form = INNER_QUOTES[turn % len(INNER_QUOTES)]
        rows[i]["abstract"] = form.format(a=rows[i]["abstract"], w=word, W=word.capitalize())
    return rows


def unpinned_rows(seed: int = 12) -> list[dict[str, str]]:
    """One OpenReview-like record for each way of UNPINNED."""
    rows = openreview_rows(len(UNPINNED), seed)
    for i, (row, change) in enumerate(zip(rows, UNPINNED, strict=True)):
        row["id"] = row["forum"] = f"unpinned{i}"
        row["forum"] = f"{FORUM}unpinned{i}"
        for key, form in change.items():
            row[key] = form.format(a=row["abstract"], w="tokens", W="Tokens")
    return rows


def undoubled_csv(rows: list[dict[str, str]], header: list[str]) -> str:
    """CSV as an exporter writes it that quotes a field holding a comma, quote or line
    break, but does not double the quotes inside it."""

    def field(value: str) -> str:
        return f'"{value}"' if any(c in value for c in ',"\n') else value

    lines = [",".join(header)]
    lines += [",".join(field(row[c]) for c in header) for row in rows]
    return "\n".join(lines) + "\n"


# A module of Python source, as a raw folder may hold one under a data file's name.
PYTHON_SOURCE = '''"""Helpers that read the settings of a warehouse and tell a user what is wrong
with them, one line per problem, so that a run never starts on settings it cannot use."""

from __future__ import annotations

import json
from pathlib import Path

DEFAULTS = {"min_words": 20, "max_words": None, "model": "all-MiniLM-L6-v2"}


def load(path: Path) -> dict:
    """The settings in `path`, with the defaults for every key the file leaves out.

    A key the file names twice keeps its last value, as the JSON reader does, and a
    file that is not valid JSON is reported with the line and column of the problem.

    Args:
        path: the settings file, JSON, as written by hand or by the settings command.
    """
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON at line {exc.lineno}") from None
    return DEFAULTS | spec


def check(settings: dict) -> list[str]:
    problems = []
    for key, value in settings.items():
        if key not in DEFAULTS:
            problems.append(f"unknown setting {key!r}")
        elif value is not None and not isinstance(value, type(DEFAULTS[key]) or str):
            problems.append(f"{key} should be {type(DEFAULTS[key]).__name__}")
    return problems
'''
# Abstracts that are not prose: a record written out, settings, tables, code.
NOT_PROSE = {
    "object": {"title": "A study", "year": 2020, "venue": "ICML", "pages": "1-10", "doi": "x"},
    "yaml": "name: paperlake\nversion: 0.1.0\nmodel: all-MiniLM-L6-v2\nbatch_size: 64\n"
    "min_words: 20\nmax_words: 2000\ndevice: cpu",
    "markdown table": "| model | accuracy | notes |\n|---|---|---|\n| bert | 91.2 | base |\n"
    "| ours | 93.1 | with sparse attention |\n| gpt | 90.1 | zero shot |",
    "latex table": "Method & Accuracy & F1 \\\\\nBERT & 91.2 & 88.1 \\\\\nRoBERTa & 92.0 & 89.3 "
    "\\\\\nOurs & 93.1 & 90.2 \\\\\nBaseline & 85.0 & 80.1 \\\\",
    "numbers": "epoch loss acc f1\n1 0.93 0.61 0.58\n2 0.71 0.70 0.66\n3 0.55 0.77 0.74\n"
    "4 0.49 0.80 0.78\n5 0.45 0.82 0.80",
    "javascript": "function debounce(fn, wait) {\n  let timer = null;\n  return function (...args) "
    "{\n    clearTimeout(timer);\n    timer = setTimeout(() => fn.apply(this, args), wait);\n"
    "  };\n}",
    "c": "#include <stdio.h>\nint main(int argc, char **argv) {\n    for (int i = 0; i < argc; "
    'i++) {\n        printf("%s\\n", argv[i]);\n    }\n    return 0;\n}',
}
# Prose that must stay prose: other languages and scripts, LaTeX, a structured abstract,
# a hard-wrapped one, one about code.
PROSE = {
    "german": "Wir untersuchen, wie sich große Sprachmodelle auf kleine Geräte übertragen "
    "lassen. Dazu schlagen wir ein Verfahren vor, das die Gewichte schrittweise "
    "verdichtet und dabei die Genauigkeit auf sieben Datensätzen weitgehend erhält.",
    "chinese": "我们提出了一种新的稀疏注意力方法，它在长文本上的计算量随序列长度线性增长。"
    "在七个基准数据集上，该方法在保持精度的同时将推理速度提高了三倍，并且易于实现。",
    "russian": "Мы изучаем, как большие языковые модели переносятся на малые устройства. "
    "Предложенный метод постепенно сжимает веса и сохраняет точность на семи наборах "
    "данных, а код метода открыт.",
    "latex": "We prove that for every $\\epsilon > 0$ the map $f: \\mathbb{R}^n \\to "
    "\\mathbb{R}^m$ with $\\|f(x) - f(y)\\| \\le L \\|x - y\\|$ admits an "
    "$O(n \\log n)$ algorithm, improving the bound of $O(n^2)$ known since 1998.",
    "structured": "BACKGROUND: Breast cancer screening reduces deaths in women over fifty.\n"
    "METHODS: We followed 12,000 women in four regions for ten years.\nRESULTS: Deaths "
    "fell by 21% (95% CI 15-27%) among women screened every two years.\nCONCLUSIONS: "
    "Screening every two years is worth its cost in these regions.",
    "wrapped": "  We study the response of a driven oscillator to slow changes of its\n"
    "frequency, and show that the adiabatic invariant is kept to all orders in the\n"
    "rate of change when the driving is smooth.\n  We then turn to the case where the\n"
    "driving has a kink, and find a correction that scales as the square of the rate.",
    "about code": "We present a tool that finds bugs in Python programs by reading their "
    "source code, and show that it finds 41 bugs in 12 popular packages, among them "
    "errors in how functions such as json.loads and os.path.join are called.",
}
WITHDRAWN = (
    "This paper has been withdrawn by the authors.",
    "This submission has been withdrawn by the author due to an error in Lemma 3.",
    "Withdrawn.",
    "[Withdrawn]",
    "The authors have withdrawn this paper because a crucial step of the proof fails.",
)


def stripped_letter(text: str, letter: str, keep_every: int = 0) -> str:
    """`text` as a broken scrape leaves it: every `letter` (either case) gone, or all but
    every `keep_every`-th one."""
    seen = 0

    def drop(char: str) -> str:
        nonlocal seen
        if char.lower() != letter:
            return char
        seen += 1
        return char if keep_every and seen % keep_every == 0 else ""

    return "".join(drop(char) for char in text)


def mojibake(text: str) -> str:
    """`text` written as UTF-8 and read back as cp1252 (Latin-1 where cp1252 has no
    character): "café" as "cafÃ©", "’" as "â€™"."""
    return "".join(
        byte.decode("cp1252", errors="strict")
        if byte[0] not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)
        else byte.decode("latin-1")
        for byte in (bytes([b]) for b in text.encode("utf-8"))
    )


def export_jsonl(abstracts: list[str], titles: list[str] | None = None) -> str:
    """JSON Lines of records with ids, titles and the given abstracts."""
    titles = titles or [f"Paper {i}" for i in range(len(abstracts))]
    return "".join(
        json.dumps({"id": f"p{i}", "title": t, "abstract": a}, ensure_ascii=False) + "\n"
        for i, (t, a) in enumerate(zip(titles, abstracts, strict=True))
    )


def cut_short(data: bytes) -> bytes:
    """Gzip data cut before its end: the last 2,000 bytes, or a fifth of a small file."""
    return data[: len(data) - min(2000, len(data) // 5)]


def write_all(folder: Path, scale: float = 1.0) -> list[Path]:
    """Every hostile export in one folder, as a user's folder of real exports looks.

    `scale` shrinks the record counts (0.02: about 60 records in all) for runs that embed.
    """

    def count(n: int) -> int:
        return max(3, round(n * scale))

    rows = openreview_rows(count(400))
    broken_link = openreview_rows(count(2000), seed=3)
    broken_link[min(1234, len(broken_link) - 1)]["abstract"] += (
        " Code: http://[broken and more text follows the link."
    )
    lines = "\n".join(r["abstract"] for r in openreview_rows(count(60), seed=5)) + "\n"
    jsonl = "".join(json.dumps(r) + "\n" for r in openreview_rows(count(300), seed=9))
    return [
        write(
            folder / "NeurIPS2023-OpenReviewData" / "oral.csv", naive_csv(rows, OPENREVIEW_HEADER)
        ),
        write(folder / "iclr_2024" / "links.csv", proper_csv(broken_link, OPENREVIEW_HEADER)),
        write(folder / "misc" / "one_per_line.txt", lines),
        write(folder / "misc" / "not_json.json", lines),
        write(folder / "acl-2025-long.jsonl", jsonl),
        write(folder / "truncated.jsonl.gz", cut_short(gzip.compress(jsonl.encode()))),
        write(
            folder / "latin1.csv",
            proper_csv(rows[:20], OPENREVIEW_HEADER).encode("latin-1", "replace"),
        ),
        write(folder / "huge_line.txt", "word " * 2_000_000 + "\n" + lines),
        write(folder / "no_abstract_column.csv", "paper,notes\n" + "p1,see the pdf\n" * 3),
        write(
            folder / "ICLR17_quotes.csv",
            undoubled_csv(inner_quote_rows(count(400)) + unpinned_rows(), OPENREVIEW_HEADER),
        ),
        write(
            folder / "scrape_lost_p.jsonl",
            export_jsonl([stripped_letter(a, "p") for a in sample_abstracts()[: count(38)]]),
        ),
    ]


if __name__ == "__main__":
    for path in write_all(Path(sys.argv[1])):
        print(path)
