"""Mentions: the vocabulary of benchmarks, datasets and metrics looked for in abstracts,
and the SQL macros that read a mention's number and context (sql/macros/mentions.sql)."""

from __future__ import annotations

import duckdb
import polars as pl

from flows.core.lake import read_sql
from flows.core.settings import SQL_DIR


def mention_vocabulary() -> pl.DataFrame:
    """Benchmarks, datasets and metrics to look for: sql/seeds/mentions.csv (name, kind,
    RE2 pattern); extend the file to track more."""
    return pl.read_csv(SQL_DIR / "seeds" / "mentions.csv", infer_schema=False)


def stage_vocabulary(con: duckdb.DuckDBPyConnection) -> None:
    """Put the mention vocabulary in `con`, with all its patterns as one alternation, and
    the macros that read a mention's number and context (`mention_macros`)."""
    vocabulary = mention_vocabulary()
    con.register("vocabulary_frame", vocabulary)
    con.execute("create or replace table mention_vocabulary as select * from vocabulary_frame")
    con.unregister("vocabulary_frame")
    alternation = "|".join(f"(?:{pattern})" for pattern in vocabulary["pattern"])
    con.execute("set variable mention_pattern = ?", [alternation])
    macros = mention_macros(vocabulary["pattern"].to_list())
    con.execute(macros)
    # Kept beside them for PaperRows' key: reading macros back from duckdb_functions()
    # lists every function DuckDB has. Their form for a few papers too, which PaperRows
    # defines while it reads those (`MACRO_ROWS_MAX`).
    con.execute("set variable macros = ?", [macros])
    each_row = mention_macros(vocabulary["pattern"].to_list(), each_row=True)
    con.execute("set variable macros_each_row = ?", [each_row])


# A query over at most this many papers calls the mention macros in their form that builds
# each regular expression from the row's pattern (`mention_macros(each_row=True)`): it
# compiles only the patterns that the papers mention, once per mention, where the other
# form compiles every pattern of the vocabulary once a query: quicker for a few papers,
# far slower for many (bench/).
MACRO_ROWS_MAX = 100


def mention_macros(patterns: list[str], each_row: bool = False) -> str:
    """sql/macros/mentions.sql with its "when 'PATTERN'" lines written once per pattern,
    each pattern quoted as a SQL string (see there).

    `each_row`: each macro is instead its branch with the row's pattern spliced into the
    regular expression (the same expression, so the same results), without the case."""
    quoted = list(dict.fromkeys(p.replace("'", "''") for p in patterns))
    lines = []
    for line in read_sql("macros/mentions").splitlines():
        branch = line.lstrip().startswith("when 'PATTERN'")
        if not each_row:
            lines += [line.replace("PATTERN", q) for q in quoted] if branch else [line]
        elif branch:
            expression = line.split(" then ", 1)[1]
            lines.append("    " + expression.replace("PATTERN", "' || pattern || '"))
        elif line.strip() == "end;":
            lines.append(";")
        elif line.strip() != "case pattern":
            lines.append(line)
    return "\n".join(lines)
