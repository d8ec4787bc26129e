"""A failed expectation in words a person acts on: "papers: 4 papers have fewer words than
20 (word_count)". The run prints these lines and the data-quality page opens with them, the
page naming each failing row by its title beneath."""

from __future__ import annotations

import json
from typing import Any

# What a row of each table is, singular and plural; other tables have rows.
ROW_NOUNS: dict[str, tuple[str, str]] = {
    "papers": ("paper", "papers"),
    "sources": ("file", "files"),
    "rejects": ("rejected record", "rejected records"),
    "paper_sources": ("record", "records"),
    "embeddings": ("embedding", "embeddings"),
    "paper_topics": ("paper", "papers"),
    "paper_coordinates": ("paper", "papers"),
    "authors": ("author", "authors"),
    "duplicates": ("pair", "pairs"),
    "duplicate_groups": ("grouped paper", "grouped papers"),
    "neighbors": ("neighbor pair", "neighbor pairs"),
    "mentions": ("mention", "mentions"),
    "topics": ("topic", "topics"),
    "runs": ("run", "runs"),
    "dq_results": ("result", "results"),
}
# Columns that count something: their bounds read as "fewer words than 20".
COUNTED: dict[str, str] = {
    "word_count": "words",
    "flag_count": "flags",
    "unresolved_macro_count": "unresolved TeX macros",
}
KEYS_OF_TABLE = "expect_column_values_to_be_keys_of_table"


def number(value: Any) -> str:
    """A threshold or count as people write it: 1500, 0.999, 20."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:g}"


def a(word: str) -> str:
    """`word` after its article: "a year", "an abstract"."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def noun(table: str, count: int = 2) -> str:
    """What `count` rows of `table` are called: "1 paper", "3 files", "2 rows"."""
    one, many = ROW_NOUNS.get(table, ("row", "rows"))
    return one if count == 1 else many


def out_of_bounds(column: str, kwargs: dict[str, Any]) -> str:
    """What a value outside min_value/max_value is, after "have": "fewer words than 20",
    "a year below 1900", "a year outside 1900 to 2100"."""
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    counted = COUNTED.get(column)
    if counted:
        if low is not None and high is not None:
            if low == high == 0:
                return counted
            return f"fewer than {number(low)} or more than {number(high)} {counted}"
        if low is not None:
            return f"fewer {counted} than {number(low)}"
        return f"more {counted} than {number(high)}"
    if low == 0 and high is not None and column.endswith("_share"):  # a share is never below 0
        return f"{a(column)} above {number(high)} ({high:.0%})"
    if low is not None and high is not None:
        if low == high:
            return f"{a(column)} other than {number(low)}"
        return f"{a(column)} outside {number(low)} to {number(high)}"
    if low is not None:
        return f"{a(column)} {'of at most' if kwargs.get('strict_min') else 'below'} {number(low)}"
    return f"{a(column)} {'of at least' if kwargs.get('strict_max') else 'above'} {number(high)}"


def lengths_out_of_bounds(column: str, kwargs: dict[str, Any]) -> str:
    """What a text outside min_value/max_value characters is, after "have"."""
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    if high is None and low == 1:
        return f"an empty {column}"
    if high is None:
        return f"{a(column)} shorter than {number(low)} characters"
    if low is None:
        return f"{a(column)} longer than {number(high)} characters"
    return f"{a(column)} shorter than {number(low)} or longer than {number(high)} characters"


def what_they_have(expectation: str, column: str, kwargs: dict[str, Any]) -> str | None:
    """What the failing rows have, after "have", or None for an expectation not worded."""
    pair_a, pair_b = kwargs.get("column_A"), kwargs.get("column_B")
    if expectation == "expect_column_values_to_be_between":
        return out_of_bounds(column, kwargs)
    return {
        "expect_column_values_to_not_be_null": f"no {column}",
        "expect_column_values_to_be_null": f"{a(column)}, which should be missing",
        "expect_column_values_to_be_unique": f"{a(column)} that another row has too",
        "expect_column_value_lengths_to_be_between": lengths_out_of_bounds(column, kwargs),
        "expect_column_values_to_match_regex": f"{a(column)} not matching {kwargs.get('regex')}",
        "expect_column_values_to_not_match_regex": f"{a(column)} matching {kwargs.get('regex')}",
        "expect_column_values_to_be_in_set": f"{a(column)} other than "
        + ", ".join(map(str, kwargs.get("value_set") or [])),
        "expect_compound_columns_to_be_unique": "the ("
        + ", ".join(kwargs.get("column_list") or [])
        + ") of another row",
        "expect_column_pair_values_to_be_equal": f"{pair_a} ≠ {pair_b}",
        "expect_column_pair_values_a_to_be_greater_than_b": f"{pair_a} "
        f"{'<' if kwargs.get('or_equal') else '≤'} {pair_b}",
    }.get(expectation)


def headline(row: dict[str, Any]) -> str:
    """A failed dq_results row in words: the table, how many of its rows broke the check and
    how, and the column where the words do not name it.

    Args:
        row: suite, expectation, column_name, kwargs (JSON text or a dict),
            unexpected_count, element_count, observed_value.
    """
    suite, expectation = row["suite"], row["expectation"]
    column = row.get("column_name") or ""
    kwargs = row.get("kwargs") or {}
    if isinstance(kwargs, str):
        kwargs = json.loads(kwargs)
    count = row.get("unexpected_count")
    if expectation == "expect_table_row_count_to_equal":
        expected = number(kwargs.get("value"))
        return f"{suite}: {row.get('observed_value')} rows where {expected} were expected"
    if expectation == KEYS_OF_TABLE:
        values = "value names" if count == 1 else "values name"
        return f"{suite}: {count} {column} {values} no {noun(kwargs.get('table') or '', 1)}"
    have = what_they_have(expectation, column, kwargs)
    if have is None or count is None:
        text = f"{suite}: {expectation.removeprefix('expect_').replace('_', ' ')}"
        text += f" ({column})" if column else ""
        observed = row.get("observed_value")
        return text + (f": {count} failing" if count else f": observed {observed}")
    text = f"{suite}: {count} {noun(suite, count)} {'has' if count == 1 else 'have'} {have}"
    if column and column not in have:
        text += f" ({column})"
    mostly = kwargs.get("mostly")
    if mostly is not None and mostly < 1:
        text += f", more than the {1 - mostly:.0%} allowed"
    return text
