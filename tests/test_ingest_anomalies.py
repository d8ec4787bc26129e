"""Anomalies of a whole file, from character statistics: a letter lost from every abstract,
mojibake, entities escaped twice. The file is warned about and its records flagged; the
sample and the real corpora show none."""

from __future__ import annotations

import json

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flows import ingest
from flows.ingest.anomalies import LETTER_SHARES, letter_counts
from tests.conftest import SAMPLE_RAW, SHARED_CORPORA, write
from tests.hostile import export_jsonl, mojibake, sample_abstracts, stripped_letter

ABSTRACTS = sample_abstracts()


def read_one(path) -> tuple[dict, pl.DataFrame]:
    result = ingest.ingest([path])
    return result.sources.row(0, named=True), result.records.sort("record_no")


@pytest.mark.parametrize("keep_every", [0, 20])
def test_a_letter_lost_from_every_abstract_is_warned_about_and_flagged(tmp_path, keep_every):
    """ "We roose to tackle the roblem": every p gone, or all but one in twenty."""
    lost = [stripped_letter(a, "p", keep_every) for a in ABSTRACTS]
    source, records = read_one(write(tmp_path / "iclr_2024" / "scrape.jsonl", export_jsonl(lost)))
    flagged = records.filter(pl.col("flags").list.contains("missing_letter:p"))
    # A record is flagged where its length expects 3 p's or more (so: every one here).
    assert flagged.height == 38
    assert json.loads(source["flag_counts"]) == {"missing_letter:p": 38}
    share = "0.00%" if not keep_every else "0.10%"
    assert source["warning"] == (
        f"'p' is {share} of its letters where text has about 1.9% (a letter lost in export?): "
        "38 records flagged missing_letter:p"
    )


def test_the_same_abstracts_whole_show_no_lost_letter(tmp_path):
    source, records = read_one(
        write(tmp_path / "iclr_2024" / "whole.jsonl", export_jsonl(ABSTRACTS))
    )
    assert (source["warning"], source["flag_counts"]) == (None, "{}")
    assert records["flags"].list.len().sum() == 0


def test_mojibake_is_warned_about_and_only_its_records_flagged(tmp_path):
    texts = [f"{a} Results in café conditions — “robust” overall." for a in ABSTRACTS[:20]]
    texts[3], texts[11] = mojibake(texts[3]), mojibake(texts[11])
    source, records = read_one(write(tmp_path / "iclr_2024" / "latin.jsonl", export_jsonl(texts)))
    flagged = records.filter(pl.col("flags").list.contains("mojibake"))["external_id"]
    assert flagged.to_list() == ["p3", "p11"]
    assert source["warning"] == (
        "mojibake such as 'Ã©' (UTF-8 read as Latin-1 or cp1252): 2 records flagged mojibake"
    )


def test_entities_escaped_twice_are_decoded_warned_about_and_flagged(tmp_path):
    titles = [f"Paper {i}" for i in range(5)]
    titles[2] = "Q&amp;amp;A at scale"
    texts = ABSTRACTS[:5]
    texts[4] = texts[4] + " It&amp;#39;s fast."
    source, records = read_one(
        write(tmp_path / "iclr_2024" / "escaped.jsonl", export_jsonl(texts, titles))
    )
    flagged = records.filter(pl.col("flags").list.contains("html_entities"))
    assert flagged["external_id"].to_list() == ["p2", "p4"]
    assert flagged["title"][0] == "Q&A at scale"
    assert source["warning"] == (
        "HTML entities escaped twice such as '&amp;amp;' (decoded): 2 records flagged html_entities"
    )


def test_the_sample_shows_no_anomaly():
    result = ingest.ingest([SAMPLE_RAW])
    assert result.sources["warning"].to_list() == [None, None]
    assert result.records["flags"].list.len().sum() == 0


def test_the_real_corpora_show_no_anomaly_but_their_withdrawal_notice():
    if not SHARED_CORPORA.is_dir():
        pytest.skip("no ../shared/corpora beside this checkout")
    result = ingest.ingest([SHARED_CORPORA / d for d in ("arxiv", "openreview", "pubmed")])
    warnings = dict(result.sources.select("path", "warning").rows())
    assert warnings == {
        str(SHARED_CORPORA / "arxiv" / "arxiv-metadata-oai-snapshot.json"): (
            "withdrawal notices, not abstracts: 1 record flagged withdrawn"
        ),
        str(SHARED_CORPORA / "openreview" / "ICLR17_submissions.csv"): None,
        str(SHARED_CORPORA / "pubmed" / "pubmed_abstracts.csv"): None,
    }
    flags = result.records["flags"].explode().drop_nulls().value_counts(sort=True)
    assert dict(flags.rows()) == {"short_abstract": 4, "withdrawn": 1}


@settings(max_examples=150, deadline=None, database=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.text(st.characters(exclude_categories=("Cs",))),
            st.sampled_from(["KELVIN \u212a", "İstanbul", "ΣΊΣΥΦΟΣ", "ǅemal", "ﬀ", "ẞ"]),
        ),
        max_size=8,
    )
)
def test_letters_are_counted_as_the_regular_expressions_count_them(abstracts):
    """A byte count of the lower-cased text gives what a regular expression a letter gives,
    whatever the characters (some lower-case to ASCII letters, some to several)."""
    lower = pl.col("abstract").str.to_lowercase()
    expected = pl.DataFrame({"abstract": abstracts}, schema={"abstract": pl.String}).select(
        _letters=lower.str.count_matches("[a-z]").sum(),
        **{c: lower.str.count_matches(c, literal=True).sum() for c in LETTER_SHARES},
    )
    series = pl.Series("abstract", abstracts, dtype=pl.String)
    assert letter_counts(series) == expected.row(0, named=True)
