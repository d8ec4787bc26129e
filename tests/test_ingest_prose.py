"""Records that are not abstracts: code, dictionaries and tables are rejected as
`not_prose`, withdrawal notices are flagged, and prose of every kind stays accepted."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from flows import ingest
from tests.conftest import SHARED_CORPORA, write
from tests.hostile import NOT_PROSE, PROSE, PYTHON_SOURCE, WITHDRAWN


def jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def test_python_source_named_json_gives_no_abstracts(tmp_path):
    result = ingest.ingest([write(tmp_path / "abstracts.json", PYTHON_SOURCE)])
    source = result.sources.row(0, named=True)
    assert (source["format"], source["accepted"]) == ("blocks", 0)
    assert json.loads(source["rejected_by_rule"]) == {"not_prose": 4, "too_short": 4}
    reasons = dict(
        result.rejects.filter(pl.col("rule") == "not_prose").select("line", "reason").rows()
    )
    assert reasons == {
        1: "not prose: it holds a line of a definition, docstring or import",
        # A docstring's middle paragraph reads as prose on its own; its file does not.
        15: "not prose: 3 of the 4 records of its file are code, dictionaries or tables",
        18: "not prose: it holds a line of a definition, docstring or import",
        28: "not prose: 26% of its 38 tokens are code",
    }


def test_code_dictionaries_and_tables_are_rejected_and_prose_of_every_kind_kept(tmp_path):
    records = [{"id": k, "title": f"Record {k}", "abstract": v} for k, v in NOT_PROSE.items()]
    records += [{"id": k, "title": f"Record {k}", "abstract": v} for k, v in PROSE.items()]
    result = ingest.ingest([write(tmp_path / "mixed.jsonl", jsonl(records))])
    rejected = dict(result.rejects.select("raw_snippet", "rule").rows())
    assert sorted(result.records["external_id"].to_list()) == sorted(PROSE)
    assert set(rejected.values()) == {"not_prose"} and len(rejected) == len(NOT_PROSE)
    reasons = dict(result.rejects.select("raw_snippet", "reason").rows())
    ids = {snippet: re.match(r'\{"id": "([^"]+)"', snippet)[1] for snippet in reasons}
    assert {ids[snippet]: reason for snippet, reason in reasons.items()} == {
        "object": "not prose: an object written out, with 5 quoted keys",
        "yaml": "not prose: 43% of its 14 tokens read as words",
        "markdown table": "not prose: 38% of its 32 tokens read as words",
        "latex table": "not prose: 17% of its 30 tokens read as words",
        "numbers": "not prose: 17% of its 24 tokens read as words",
        "javascript": "not prose: 45% of its 22 tokens read as words",
        "c": "not prose: 38% of its 24 tokens read as words",
    }


def test_withdrawal_notices_are_flagged_and_abstracts_about_withdrawal_are_not(tmp_path):
    about = "Patients who had withdrawn from the trial were excluded, " + "and so on " * 10
    records = [{"id": f"w{i}", "title": "A paper", "abstract": a} for i, a in enumerate(WITHDRAWN)]
    records.append({"id": "about", "title": "A trial", "abstract": about})
    result = ingest.ingest([write(tmp_path / "notices.jsonl", jsonl(records))])
    flags = dict(result.records.select("external_id", "flags").rows())
    assert {k for k, v in flags.items() if "withdrawn" in v} == {f"w{i}" for i in range(5)}
    source = result.sources.row(0, named=True)
    assert json.loads(source["flag_counts"])["withdrawn"] == 5


def test_no_real_abstract_in_the_shared_corpora_is_taken_for_code():
    if not SHARED_CORPORA.is_dir():
        pytest.skip("no ../shared/corpora beside this checkout")
    result = ingest.ingest([SHARED_CORPORA / d for d in ("arxiv", "openreview", "pubmed")])
    assert result.rejects["rule"].to_list() == ["empty_abstract"]
    assert result.records.height == 826
    notices = result.records.filter(pl.col("flags").list.contains("withdrawn"))
    assert notices["abstract"].to_list() == ["This paper has been withdrawn by the authors."]
