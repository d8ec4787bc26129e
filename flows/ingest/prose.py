"""Whether a record's text is prose: source code, `key: value` dictionaries and tables that
a reader took for abstracts (a file of Python named `.json`, read as blocks) are rejected
as `not_prose`, told by the shape of their words and lines.

Every measure is a regular-expression count over the raw text, in polars: a token is a
run of non-space characters, a line a non-blank line.
"""

from __future__ import annotations

import polars as pl

# Letters a word of running text continues with after its first: lower case, the letters
# of scripts without case (CJK, Arabic, ...), marks, and CJK punctuation inside a token.
_WORD_CHARS = r"[\p{Ll}\p{Lo}\p{Lm}\p{M}\x{3000}-\x{303F}\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF20}]"
# A token that reads as a word of running text: letters (a capital first at most, inner
# hyphens and apostrophes, digits last: word2vec's "word2"), between opening and closing
# punctuation.
WORD = rf"[(\[«\"“‘']?\p{{L}}(?:{_WORD_CHARS}|[-'’]\p{{L}})*\d*[,.;:!?)\]»\"”’'%]*"
# A token only code has: snake_case or dunder names, calls and attribute chains, operators,
# lone brackets, keywords and literals of code.
CODE_TOKEN = (
    r"(?:[\w.]*\p{Ll}_\w+|__\w+__|\w+\.\w+\(\S*|\w+\([^()\s]*\)[:;,]?|self\.\S+|"
    r"def|elif|lambda|None|True|False|null|nil|return|import|#include|"
    r"[=!<>+\-*/%]=|->|=>|::|&&|\|\||[{}()\[\]];?|\)[:;{]|\[\]|\{\}|\(\)|#+|//)"
)


def _in_line(pattern: str) -> str:
    """A pattern matched within one line: its spaces (\\s) never match a line break."""
    return pattern.replace(r"\s", r"[ \t]")


# Lines of code, by how they start: a definition, an import, a block header (with a
# bracket or operator, and a colon), a declaration, a comment, lone closing brackets, an
# assignment, a bare call, a block header ending in a colon.
CODE_LINE = _in_line(
    r"\s*(?:def|class|fn|func|function)\s+\w+\s*[(:<{]"
    r"|\s*(?:import\s+[\w.]+(?:\s+as\s+\w+)?\s*;?\s*$|from\s+[\w.]+\s+import\s)"
    r"|\s*(?:else|try|finally)\s*:\s*$"
    r"|\s*(?:elif|if|while|for|except|with)\b[^.,;\n]*[=<>()\[\]][^.,;\n]*:\s*$"
    r"|\s*(?:var|let|const)\s+\w+\s*=|\s*(?:public|private|protected|static)\s+\w.*[({;]\s*$"
    r"|\s*(?:#(?:\s|!|include)|//|/\*|\*/)|\s*@\w+(?:\(.*\))?\s*$|\s*[})\]]+[;,)]*\s*$"
    r"|\s*[\w.\[\]\"']+\s*(?:[+\-*/|&]?=|==)\s*\S|\s*[\w.]+\(.*\)[;,]?\s*$"
    r"|\s*[\w.]+(?:\(.*\))?:\s*$"
)
# Lines of code, by how they end: an opening brace, a header's closing bracket and colon.
CODE_LINE_END = _in_line(r"\{\s*$|\)\s*(?:->\s*\S+\s*)?:\s*$")
# Lines no prose holds: a definition with its parameters, a docstring's quotes, an import.
STRONG_CODE_LINE = _in_line(
    r"\s*(?:def|class)\s+\w+\s*\(.*\)?\s*(?:->.*)?:?\s*$|\s*(?:\"\"\"|''')"
    r"|\s*(?:import\s+[\w.]+(?:\s+as\s+\w+)?|from\s+[\w.]+\s+import\s+[\w(*])"
)
# A `key: value` line with a short value that is no sentence (it does not end as one does):
# a dictionary, YAML, settings, a record's fields; not a structured abstract's "RESULTS:".
KEY_VALUE_LINE = _in_line(r"\s*[\"']?[\w .\-/]{1,40}[\"']?\s*:\s*\S(?:.{0,58}[^.!?\s])?\s*$")
# A table row: short cells between bars, tabs or ampersands (LaTeX), or a row of numbers.
TABLE_LINE = _in_line(
    r"\s*\|.*\|\s*$|(?:[^|\n]{0,40}\s\|\s){2}|[^\t\n]{0,40}\t[^\t\n]{0,40}\t"
    r"|(?:[^&\n]{0,40}\s&\s){2}|[^\p{L}\n]*(?:[-+]?\d[\d.,%]*\s+){3,}"
)
# TeX's inline math, in dollars or \\( \\).
INLINE_MATH = r"\$[^$\n]{1,200}\$|\\\([^\n]{1,200}?\\\)"
TEX_MACRO = r"\\[A-Za-z]+\{([^{}\n]*)\}"
# A JSON object or a Python dict written out: an opening brace, then quoted keys.
JSON_KEY = r"[\"'][^\"'\n]{1,40}[\"'][ \t]*:"
FEATURES = (
    "json_keys",
    "words",
    "word_share",
    "code_share",
    "lines",
    "structured_share",
    "indented_share",
    "strong_lines",
)


def measure(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """`frame` with the measures (FEATURES) of a raw text column that tell prose from code,
    dictionaries and tables: tokens, the shares of them that read as words and as code,
    non-blank lines, the shares of them shaped as code, `key: value` or table rows and
    indented (for texts of 3 lines or more), the lines only code holds, and an object's
    quoted keys."""
    text = pl.col(column).fill_null("")
    tokens, lines = pl.col("words"), pl.col("lines")
    # Inline math ($...$) reads as a word, a TeX macro as its argument; every space is
    # doubled, so that each token has spaces of its own to be matched between.
    spaced = pl.col("_spaced")
    words = text.str.replace_all(INLINE_MATH, "math").str.replace_all(TEX_MACRO, "${1}")
    frame = frame.with_columns(
        words=words.str.count_matches(r"\S+"),
        lines=text.str.count_matches(r"(?m)^[ \t]*\S"),
        _spaced=words.str.replace_all(" ", "  ", literal=True)
        .str.replace_all("\n", "\n\n", literal=True)
        .str.replace_all("\t", "\t\t", literal=True),
    )

    def line_count(pattern: str, anchor: str = "^") -> pl.Expr:
        return text.str.count_matches(f"(?m){anchor}(?:{pattern})")

    measured = frame.with_columns(
        json_keys=pl.when(text.str.contains(r"^\s*\[?\s*\{"))
        .then(text.str.count_matches(JSON_KEY))
        .otherwise(0),
        word_share=spaced.str.count_matches(rf"(?:^|\s){WORD}(?:\s|$)") / tokens.clip(1),
        code_share=spaced.str.count_matches(rf"(?:^|\s){CODE_TOKEN}(?:\s|$)") / tokens.clip(1),
        strong_lines=line_count(STRONG_CODE_LINE),
    ).drop("_spaced")
    # The shares of lines matter for texts of 3 lines or more only: measured for those.
    several = measured.with_row_index("_row").filter(lines >= 3)
    shares = several.select(
        "_row",
        # A line of two kinds counts twice: the share is capped at all lines.
        structured_share=(
            pl.sum_horizontal(
                line_count(CODE_LINE), line_count(CODE_LINE_END, ""),
                line_count(KEY_VALUE_LINE), line_count(TABLE_LINE),
            ) / lines
        ).clip(upper_bound=1),
        indented_share=line_count(r"(?: {4}|\t)[ \t]*\S") / lines,
    )  # fmt: skip
    return (
        measured.with_row_index("_row")
        .join(shares, on="_row", how="left")
        .drop("_row")
        .with_columns(pl.col("structured_share", "indented_share").fill_null(0.0))
    )


def not_prose(frame: pl.DataFrame, column: str) -> pl.Series:
    """Where the raw text of `column` is code, a dictionary or a table rather than prose
    (see _decision)."""
    return measure(frame, column).select(_decision().alias("not_prose")).to_series()


def _decision() -> pl.Expr:
    """Not prose, from the measures.

    Real abstracts (826 of them: arXiv, OpenReview, PubMed, and the sample's 38) read as
    words at 69% or more of their tokens, hold at most 6% code tokens and no line only
    code holds, and of 3 lines or more at most 13% are structured and 28% indented. Code,
    `key: value` text and tables fall beyond one of these bounds: fewer than half their
    tokens words, an object's quoted keys, 12% code tokens, a definition, docstring or
    import line, 60% structured lines, or mostly indented lines with some code in them.
    """
    f = {name: pl.col(name) for name in FEATURES}
    several = f["lines"] >= 3
    return (f["words"] >= 5) & (
        (f["word_share"] < 0.5)
        | (f["json_keys"] >= 3)
        | (f["code_share"] >= 0.12)
        | (f["strong_lines"] > 0)
        | (several & (f["structured_share"] >= 0.6))
        | (
            several
            & (f["indented_share"] >= 0.5)
            & ((f["code_share"] >= 0.03) | (f["structured_share"] >= 0.25))
        )
    )


# A file whose records are this much code (of this many or more) holds no abstracts: its
# other records (a docstring's paragraph reads as prose) are taken as code too.
CODE_FILE_SHARE = 2 / 3
CODE_FILE_RECORDS = 3


def reject_not_prose(cleaned: pl.DataFrame) -> pl.DataFrame:
    """`cleaned` (with `rule` and `reason` of the checks before) with the records that are
    not prose rejected as `not_prose`, and why: their measures, or the share of their
    file's records that are code, dictionaries or tables."""
    eligible = pl.col("rule").is_null()
    measured = measure(cleaned.select("source_path", "rule", "abstract_raw"), "abstract_raw")
    own = pl.col("_own")
    judged = measured.with_columns(_own=_decision() & eligible).with_columns(
        _file_code=own.sum().over("source_path"), _file_all=eligible.sum().over("source_path")
    )
    code_file = (pl.col("_file_all") >= CODE_FILE_RECORDS) & (
        pl.col("_file_code") >= CODE_FILE_SHARE * pl.col("_file_all")
    )
    file_reason = pl.format(
        "not prose: {} of the {} records of its file are code, dictionaries or tables",
        "_file_code",
        "_file_all",
    )
    verdict = judged.select(
        not_prose=eligible & (own | code_file),
        why=pl.when(own).then(_reason()).otherwise(file_reason),
    )
    hit = verdict["not_prose"]
    return cleaned.with_columns(
        rule=pl.when(hit).then(pl.lit("not_prose")).otherwise(pl.col("rule")),
        reason=pl.when(hit).then(verdict["why"]).otherwise(pl.col("reason")),
    )


def _reason() -> pl.Expr:
    """Why a text is not prose: the first bound of `_decision` it falls beyond."""
    f = {name: pl.col(name) for name in FEATURES}
    percent = {c: (f[c] * 100).round(0).cast(pl.Int64) for c in ("word_share", "code_share")}
    structured = (f["structured_share"] * f["lines"]).round(0).cast(pl.Int64)
    indented = (f["indented_share"] * f["lines"]).round(0).cast(pl.Int64)
    return (
        pl.when(f["word_share"] < 0.5)
        .then(
            pl.format(
                "not prose: {}% of its {} tokens read as words", percent["word_share"], "words"
            )
        )
        .when(f["json_keys"] >= 3)
        .then(pl.format("not prose: an object written out, with {} quoted keys", "json_keys"))
        .when(f["code_share"] >= 0.12)
        .then(pl.format("not prose: {}% of its {} tokens are code", percent["code_share"], "words"))
        .when(f["strong_lines"] > 0)
        .then(pl.lit("not prose: it holds a line of a definition, docstring or import"))
        .when(f["structured_share"] >= 0.6)
        .then(
            pl.format(
                "not prose: {} of its {} lines are code, key: value or table rows",
                structured,
                "lines",
            )
        )
        .otherwise(pl.format("not prose: {} of its {} lines are indented code", indented, "lines"))
    )
