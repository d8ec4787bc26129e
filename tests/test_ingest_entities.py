"""HTML entities in titles and abstracts: an export escaped twice reads as one escaped once,
and both read as the characters a reader of the paper sees."""

from __future__ import annotations

import html
import json

import polars as pl
from hypothesis import example, given, settings
from hypothesis import strategies as st

from flows import ingest
from tests.conftest import write

TITLE = "Q&amp;amp;A at scale: it&amp;#39;s &amp;quot;fast&amp;quot; &amp;amp;amp; R&amp;D"
ABSTRACT = (
    "We study Q&amp;amp;A. It&amp;#39;s fast &amp;mdash; and R&amp;D, AT&T and A&A; stay "
    "as written, as does a lone & sign. " + "More words follow here. " * 4
)


def test_titles_and_abstracts_escaped_twice_read_as_their_characters(tmp_path):
    record = {"id": "p1", "title": TITLE, "abstract": ABSTRACT}
    path = write(tmp_path / "escaped.jsonl", json.dumps(record) + "\n")
    row = ingest.ingest([path]).records.row(0, named=True)
    assert row["title"] == 'Q&A at scale: it\'s "fast" & R&D'
    assert row["abstract"].startswith(
        "We study Q&A. It's fast — and R&D, AT&T and A&A; stay as written, as does a lone & sign."
    )
    assert (row["title_raw"], row["abstract_raw"]) == (TITLE, ABSTRACT)  # kept as read


def cleaned(texts: list[str]) -> list[str]:
    frame = pl.DataFrame({"text": texts}, schema={"text": pl.String})
    return frame.select(ingest.clean_text("text"))["text"].to_list()


TEXT = st.lists(
    st.one_of(
        st.text(st.characters(exclude_categories=("Cs",)), max_size=12),
        st.sampled_from(["&", "&amp;", "&#39;", "&lt;b&gt;", "<i>", '"', "'", "\\&", "&amp"]),
    ),
    max_size=8,
).map("".join)


@settings(max_examples=150, deadline=None, database=None)
@given(text=TEXT)
@example(text="Q&A <b>bold</b> it's")
@example(text="&amp")
def test_escaping_text_once_or_more_never_changes_what_cleaning_makes_of_it(text):
    once = html.escape(text)
    twice = html.escape(once)
    assert cleaned([text, once, twice, html.escape(twice)]) == [cleaned([text])[0]] * 4
