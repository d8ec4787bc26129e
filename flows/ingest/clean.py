"""Cleaning: raw text into plain text, links and flags, and raw records into accepted
records (with their content id) and rejects."""

from __future__ import annotations

import hashlib
import html
import re
import unicodedata
from urllib.parse import urlparse

import polars as pl

from flows.ingest.model import RECORD_SCHEMA, REJECT_SCHEMA, SNIPPET_CHARS
from flows.ingest.prose import reject_not_prose

URL_RE = r"https?://[^\s<>\"'{}\\]*"
URL_TRAILING = ".,;:)]}'\""
CODE_HOSTS = {"github.com", "gitlab.com", "bitbucket.org", "huggingface.co", "codeberg.org"}
REVIEW_HOSTS = {"anonymous.4open.science", "openreview.net"}

# Text macros whose argument is the visible text; applied innermost first.
TEXT_MACROS = (
    "textbf|textit|texttt|textsc|textrm|textsf|emph|underline|mathrm|mathbf|mathit|"
    "mathcal|mathbb|mathsf|mathtt|boldsymbol|operatorname|text"
)
MATH_SYMBOLS = {
    "times": "×",
    "cdot": "·",
    "leq": "≤",
    "geq": "≥",
    "neq": "≠",
    "approx": "≈",
    "sim": "~",
    "pm": "±",
    "rightarrow": "→",
    "leftarrow": "←",
    "infty": "∞",
    "sqrt": "√",
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "epsilon": "ε",
    "varepsilon": "ε",
    "theta": "θ",
    "lambda": "λ",
    "mu": "μ",
    "sigma": "σ",
    "tau": "τ",
    "phi": "φ",
    "pi": "π",
    "rho": "ρ",
    "omega": "ω",
    "Omega": "Ω",
    "Delta": "Δ",
    "ell": "ℓ",
    "ldots": "...",
    "dots": "...",
}
# TeX accents (\'a, \"{o}, {\c c}) and the combining marks they stand for.
TEX_ACCENTS = {
    "'": "\u0301",
    "`": "\u0300",
    '"': "\u0308",
    "^": "\u0302",
    "~": "\u0303",
    "=": "\u0304",
    ".": "\u0307",
    "c": "\u0327",
    "v": "\u030c",
    "u": "\u0306",
    "H": "\u030b",
    "r": "\u030a",
}
# Inline tags vanish (R<sup>2</sup> is R2); block tags leave a space between words.
# Attributes must have a value, so that "a<b and c>d" in running text is not a tag.
_TAG_TAIL = r"(?:\s+[\w:-]+\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'>]+))*\s*/?>"
INLINE_TAG_RE = (
    r"(?i)</?(?:b|i|u|s|em|strong|sub|sup|span|a|font|small|big|tt|code|mark|abbr|cite|q|"
    r"strike|del|ins|var|kbd|samp|math|mi|mo|mn|mrow|msup|msub|jats:italic|jats:bold|"
    r"jats:sup|jats:sub|jats:monospace|jats:sc)" + _TAG_TAIL
)
BLOCK_TAG_RE = (
    r"(?i)</?(?:p|br|div|li|ul|ol|h[1-6]|tr|td|th|table|tbody|thead|blockquote|section|"
    r"article|header|footer|hr|dl|dt|dd|jats:[a-z-]+)" + _TAG_TAIL
)
# Removed and counted: control characters other than whitespace, private-use characters,
# and invisible format characters (zero-width space, soft hyphen, byte-order mark).
CONTROL_RE = r"[\p{Cc}\p{Co}\u200b\u00ad\u2060\ufeff&&[^\t\n\r]]"
# Markup in a raw abstract: HTML tags, TeX macros and braces, entities.
MARKUP_RE = r"<[^<>]{0,200}>|\\[A-Za-z]+|[{}$]|&#?\w{1,10};"
COMMON_LETTERS = "etaoins"
# A notice in the place of an abstract: "This paper has been withdrawn (by the authors)",
# "Withdrawn.", "[Withdrawn]", "The authors have withdrawn this submission".
WITHDRAWN_RE = (
    r"(?i)^\W*(?:withdrawn\b\W*(?:$|by\b|\.|:|-|—|\])"
    r"|(?:this|the) (?:paper|article|submission|manuscript|preprint|work|version|abstract)\b"
    r"[^.]{0,80}?\b(?:has|have|had|is|was|were) (?:now |been )*withdrawn\b"
    r"|(?:this |the )?(?:author|authors) (?:has|have|had) withdrawn\b"
    r"|(?:paper|article|submission|manuscript) withdrawn\b)"
)
LINK_DTYPE = pl.List(pl.Struct({"url": pl.String, "kind": pl.String}))


def _unescape_entities(series: pl.Series) -> pl.Series:
    """HTML entities decoded (&amp; is &, &#8201; a thin space); only where an & occurs."""
    return pl.Series(
        series.name,
        [unescape(v) if v is not None and "&" in v else v for v in series.to_list()],
        dtype=pl.String,
    )


def unescape(text: str) -> str:
    """`text` with HTML entities decoded until none is left to decode: an export escaped
    twice (`Q&amp;amp;A`, `it&amp;#39;s`) reads as one escaped once does (`Q&A`, `it's`).
    Each round shortens the text, so it ends."""
    while "&" in text and (decoded := html.unescape(text)) != text:
        text = decoded
    return text


def _accent_table() -> tuple[list[str], list[str]]:
    """TeX accent spellings (\\'e, \\'{e}, {\\'e}, \\c{c}) and the letters they stand for."""

    patterns, letters = [], []
    for accent, mark in TEX_ACCENTS.items():
        for base in "aeiouycnszrgklAEIOUYCNSZRGKL":
            composed = unicodedata.normalize("NFC", base + mark)
            if len(composed) != 1:
                continue
            forms = [f"{{\\{accent}{{{base}}}}}", f"\\{accent}{{{base}}}", f"{{\\{accent}{base}}}"]
            if not accent.isalpha():
                forms.append(f"\\{accent}{base}")  # \c c needs braces or a space: not bare
            else:
                forms.append(f"{{\\{accent} {base}}}")
            patterns.extend(forms)
            letters.extend([composed] * len(forms))
    return patterns, letters


TEX_ACCENT_PATTERNS, TEX_ACCENT_LETTERS = _accent_table()


def clean_text(column: str) -> pl.Expr:
    """Plain readable text from raw text with LaTeX, markdown or HTML in it.

    HTML entities are decoded (those escaped twice or more too) and tags stripped; LaTeX
    macros, accents and math symbols are resolved; hyphenated line breaks are joined;
    Unicode spaces become plain spaces; control, private-use and invisible characters go;
    whitespace collapses; NFC.
    """
    expr = pl.col(column).fill_null("").map_batches(_unescape_entities, return_dtype=pl.String)
    expr = expr.str.replace_all(INLINE_TAG_RE, "").str.replace_all(BLOCK_TAG_RE, " ")
    expr = expr.str.replace_many(TEX_ACCENT_PATTERNS, TEX_ACCENT_LETTERS)
    for _ in range(3):  # nested macros such as \textbf{\texttt{X} y}
        expr = expr.str.replace_all(rf"\\(?:{TEXT_MACROS})\s*\{{([^{{}}]*)\}}", "${1}")
    expr = (
        expr.str.replace_all(r"\\url\{([^{}]*)\}", "${1}")
        .str.replace_all(r"\\href\{([^{}]*)\}\{([^{}]*)\}", "${2} (${1})")
        .str.replace_all(r"\*\*([^*\n]+?)\*\*", "${1}")
        .str.replace_all(r"``|''", '"')
    )
    # Longest names first, so that \\varepsilon is not read as \\var + epsilon.
    macros = sorted(MATH_SYMBOLS, key=len, reverse=True)
    expr = expr.str.replace_many([f"\\{m}" for m in macros], [MATH_SYMBOLS[m] for m in macros])
    expr = (
        expr.str.replace_all(r"\\([%&_#$])", "${1}")
        .str.replace_all(r"\$([^$]*)\$", "${1}")
        .str.replace_all(r"[{}]", "")
        # A word hyphenated across a line break keeps its hyphen and loses the break.
        .str.replace_all(r"(\pL)-[ \t]*\r?\n\s*(\pL)", "${1}-${2}")
        .str.replace_all(CONTROL_RE, "")
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
        .str.normalize("NFC")
    )
    return expr


def classify_link(url: str) -> str:
    """code | review | web | broken, by the link's host; a link that does not parse
    (http://[broken) is broken."""
    try:
        host = (urlparse(url).hostname or "").lower()
    except ValueError:
        return "broken"
    if not host or "." not in host:
        return "broken"
    host = host.removeprefix("www.")
    if host in CODE_HOSTS:
        return "code"
    if host in REVIEW_HOSTS:
        return "review"
    return "web"


def extract_links(text: str | None) -> list[dict]:
    """Every http(s) link in the text with its kind, trailing punctuation trimmed."""
    links = []
    for raw in re.findall(URL_RE, text or ""):
        url = raw.rstrip(URL_TRAILING)
        links.append({"url": url, "kind": classify_link(url)})
    return links


def content_id(title: str | None, abstract: str) -> str:
    """Stable paper id: sha256 of casefolded, whitespace-collapsed title and abstract."""
    norm = " ".join(f"{title or ''}\x1f{abstract}".casefold().split())
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()[:16]


def with_flags(accepted: pl.DataFrame, min_words: int) -> pl.DataFrame:
    """Flags for accepted abstracts that look damaged; flagged records are still accepted.

    missing_letter:<c>: a common letter absent from a long abstract (a lost character);
    all_lowercase: no capital letter at all; mostly_markup: half the raw text is markup;
    short_abstract: a titled record whose abstract has fewer than `min_words` words;
    withdrawn: a withdrawal notice where the abstract belongs; plus what readers flagged
    (repaired_fields, repaired_quotes).
    """
    raw = pl.col("abstract_raw").fill_null("")
    # Helper columns first: an eager frame does not share repeated subexpressions.
    helped = accepted.with_columns(
        _lower=pl.col("abstract").str.to_lowercase(),
        _letters=pl.col("abstract").str.replace_all(r"[^A-Za-z]+", "").str.len_bytes(),
        _raw_len=raw.str.len_chars(),
        _markup=raw.str.len_chars() - raw.str.replace_all(MARKUP_RE, "").str.len_chars(),
    )
    letters, raw_len = pl.col("_letters"), pl.col("_raw_len")
    flags = [
        pl.when((letters >= 200) & ~pl.col("_lower").str.contains(letter, literal=True)).then(
            pl.lit(f"missing_letter:{letter}")
        )
        for letter in COMMON_LETTERS
    ]
    flags += [
        pl.when((letters >= 50) & ~pl.col("abstract").str.contains(r"\p{Lu}")).then(
            pl.lit("all_lowercase")
        ),
        pl.when((raw_len >= 40) & (pl.col("_markup") * 2 >= raw_len)).then(pl.lit("mostly_markup")),
        pl.when(pl.col("title").is_not_null() & (pl.col("word_count") < min_words)).then(
            pl.lit("short_abstract")
        ),
        pl.when(pl.col("abstract").str.contains(WITHDRAWN_RE)).then(pl.lit("withdrawn")),
    ]
    read_flags = pl.col("read_flags").fill_null(pl.lit([], dtype=pl.List(pl.String)))
    return helped.with_columns(
        flags=pl.concat_list(flags).list.drop_nulls().list.concat(read_flags)
    ).drop("_lower", "_letters", "_raw_len", "_markup")


def normalise(
    records: pl.DataFrame, min_words: int, max_words: int | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Clean raw records and split them into accepted and rejected.

    A record without a title needs `min_words` words (a shorter block is more likely a
    stray line than an abstract); a titled record is a paper whatever its length, and a
    short abstract is flagged instead.

    Returns:
        accepted records with paper_id, title, abstract, word_count, links,
        unresolved_macros, flags and control_chars_removed; rejects with the rule each
        record broke.
    """
    title = clean_text("title_raw").str.replace(r"([^.])\.$", "${1}")  # "Title." is "Title"
    cleaned = (
        records.with_columns(
            control_chars_removed=(
                pl.col("title_raw").fill_null("").str.count_matches(CONTROL_RE)
                + pl.col("abstract_raw").fill_null("").str.count_matches(CONTROL_RE)
            ).cast(pl.Int32),
            title=pl.when(pl.col("title_raw").is_not_null()).then(title),
            abstract=clean_text("abstract_raw"),
        )
        .with_columns(title=pl.when(pl.col("title") != "").then(pl.col("title")))
        .with_columns(
            word_count=pl.col("abstract").str.count_matches(r"\S+").cast(pl.Int32),
            links=pl.col("abstract").map_elements(extract_links, return_dtype=LINK_DTYPE),
            unresolved_macros=pl.col("abstract")
            .str.extract_all(r"\\[A-Za-z]+")
            .list.unique(maintain_order=True),
        )
    )
    rule, reason = _rule_and_reason(min_words, max_words)
    cleaned = reject_not_prose(cleaned.with_columns(rule=rule, reason=reason))
    rejects = cleaned.filter(pl.col("rule").is_not_null()).select(
        "source_path",
        "source_sha256",
        "record_no",
        "line",
        "byte_offset",
        "rule",
        "reason",
        raw_snippet=pl.coalesce("raw_snippet", pl.col("abstract_raw").str.slice(0, SNIPPET_CHARS)),
    )
    accepted = (
        with_flags(cleaned.filter(pl.col("rule").is_null()), min_words)
        .drop("rule", "reason", "decode_error", "read_rule", "read_reason", "raw_snippet")
        .drop("read_flags")
    )
    accepted = accepted.with_columns(
        paper_id=pl.struct("title", "abstract").map_elements(
            lambda r: content_id(r["title"], r["abstract"]), return_dtype=pl.String
        )
    )
    return accepted, rejects


def _rule_and_reason(min_words: int, max_words: int | None) -> tuple[pl.Expr, pl.Expr]:
    """The rule a cleaned record breaks, and why, before `reject_not_prose` looks at it
    (null where it breaks none)."""
    too_short = (pl.col("word_count") < min_words) & pl.col("title").is_null()
    too_long = pl.col("word_count") > max_words if max_words else pl.lit(False)
    rule = (
        pl.when(pl.col("read_rule").is_not_null())
        .then(pl.col("read_rule"))
        .when(pl.col("decode_error").is_not_null())
        .then(pl.lit("invalid_utf8"))
        .when(pl.col("abstract") == "")
        .then(pl.lit("empty_abstract"))
        .when(too_short)
        .then(pl.lit("too_short"))
        .when(too_long)
        .then(pl.lit("too_long"))
    )
    reason = (
        pl.when(pl.col("read_rule").is_not_null())
        .then(pl.col("read_reason"))
        .when(pl.col("decode_error").is_not_null())
        .then(pl.col("decode_error"))
        .when(pl.col("abstract") == "")
        .then(pl.lit("abstract is empty or whitespace only"))
        .when(too_short)
        .then(
            pl.format(
                "abstract has {} words, fewer than the minimum of {}",
                pl.col("word_count"),
                pl.lit(min_words),
            )
        )
        .when(too_long)
        .then(
            pl.format(
                "abstract has {} words, more than the maximum of {}",
                pl.col("word_count"),
                pl.lit(max_words),
            )
        )
    )
    return rule, reason


def normalise_contained(
    records: pl.DataFrame, min_words: int, max_words: int | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`normalise`, where a record whose cleaning fails becomes a `cleaning_error` reject
    (with the exception) instead of failing its batch and file."""
    try:
        return normalise(records, min_words, max_words)
    except Exception:  # noqa: BLE001 - find the records at fault one by one
        pass
    accepted, rejected = [], []
    for i in range(records.height):
        row = records.slice(i, 1)
        try:
            ok, bad = normalise(row, min_words, max_words)
        except Exception as exc:  # noqa: BLE001 - one record's failure, reported on it
            reason = f"cleaning failed: {type(exc).__name__}: {exc}"
            ok, bad = (
                None,
                row.select(
                    *REJECT_SCHEMA.keys() - {"rule", "reason", "raw_snippet"},
                    rule=pl.lit("cleaning_error"),
                    reason=pl.lit(reason[:1000]),
                    raw_snippet=pl.coalesce(
                        "raw_snippet", pl.col("abstract_raw").str.slice(0, SNIPPET_CHARS)
                    ),
                ).select(list(REJECT_SCHEMA)),
            )
        if ok is not None:
            accepted.append(ok)
        rejected.append(bad)
    schema = accepted_schema(min_words)
    return concat_frames(accepted, schema), concat_frames(rejected, REJECT_SCHEMA)


def accepted_schema(min_words: int) -> dict:
    """Columns and types of accepted records (those of an empty parse)."""
    return dict(normalise(pl.DataFrame(schema=RECORD_SCHEMA), min_words)[0].schema)


def concat_frames(frames: list[pl.DataFrame], schema: dict) -> pl.DataFrame:
    frames = [f for f in frames if f.height]
    return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame(schema=schema)
