"""Links and words on a search's hits: a link only where the id's scheme is certain (a
PubMed id by the column it came from), decision codes labelled, and a topic filter that
names no topic said so."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from flows import ingest
from flows.cli import app
from flows.core.lake import connect
from flows.read import hits as read_hits
from tests.conftest import SHARED_CORPORA, write

ABSTRACT = " ".join(f"word{i}" for i in range(30))


def test_a_record_keeps_the_column_or_key_its_id_came_from(tmp_path):
    pubmed = f'pmid,title,abstract,journal\n41590124,A,"{ABSTRACT} a",Lancet\n'
    write(tmp_path / "pubmed.csv", pubmed)
    write(tmp_path / "iclr.csv", f'PID,Decision,Title,Abstract\nHJWHIKqgl,2,B,"{ABSTRACT} b"\n')
    rows = [{"id": "0704.0001", "title": "C", "abstract": f"{ABSTRACT} c"}, {"title": "D",
            "abstract": f"{ABSTRACT} d"}]  # fmt: skip
    write(tmp_path / "dump.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    result = ingest.ingest([tmp_path])
    papers, _ = ingest.build_papers(result.records)
    assert papers.columns[-1] == "id_field"  # a column added at the end
    assert sorted(papers.select("title", "external_id", "id_field").rows()) == [
        ("A", "41590124", "pmid"),
        ("B", "HJWHIKqgl", "PID"),
        ("C", "0704.0001", "id"),
        ("D", None, None),  # no id: no field
    ]


def papers_with_ids():
    """Papers with ids of every scheme, where each was read from, and their topic."""
    con = connect()
    con.execute(
        """
        create table papers as select * from (values
            ('doi', '10.1103/PhysRevD.76.013009', 'doi', 'arXiv', null),
            ('arxiv', '0704.0001', 'id', 'arXiv', null),
            ('pubmed', '41590124', 'pmid', 'Lancet', null),
            ('digits', '41590124', 'id', 'Lancet', null),
            ('forum', 'HJWHIKqgl', 'PID', 'ICLR', '2'),
            ('lower', 'ryh9pmcee', 'PID', 'ICLR', '-1'),
            ('nips', 'nips23-x2', 'id', 'NeurIPS', 'Accept (Oral)'),
            ('word', 'performance', 'id', 'NeurIPS', null)
        ) t(paper_id, external_id, id_field, venue, decision)
        """
    )
    con.execute(
        "alter table papers add column links struct(url varchar, kind varchar)[]; "
        "alter table papers add column title varchar; alter table papers add column authors "
        "varchar[]; alter table papers add column year integer; alter table papers add "
        "column abstract varchar; update papers set links = [], title = paper_id"
    )
    con.execute("create table topics as select 1 as topic_id, 'ids' as label")
    con.execute("create table paper_topics as select paper_id, 1 as topic_id from papers")
    return con


def test_a_link_only_where_the_scheme_of_the_id_is_certain():
    con = papers_with_ids()
    ids = ["doi", "arxiv", "pubmed", "digits", "forum", "lower", "nips", "word"]
    hits = read_hits.hits(con, [(p, 0.0) for p in ids])
    assert dict(zip(hits["paper_id"], hits["link"], strict=True)) == {
        "doi": "https://doi.org/10.1103/PhysRevD.76.013009",
        "arxiv": "https://arxiv.org/abs/0704.0001",
        "pubmed": "https://pubmed.ncbi.nlm.nih.gov/41590124/",  # read from a pmid column
        "digits": None,  # the same digits from a column named id: which site is not known
        "forum": "https://openreview.net/forum?id=HJWHIKqgl",
        "lower": "https://openreview.net/forum?id=ryh9pmcee",  # a real ICLR 2017 id
        "nips": None,  # a name such as nips23-x2 is no OpenReview id
        "word": None,
    }
    # A code the export does not explain is labelled as a decision; words stay words.
    assert dict(zip(hits["paper_id"], hits["decision"], strict=True)) == {
        "doi": None, "arxiv": None, "pubmed": None, "digits": None,
        "forum": "decision 2", "lower": "decision -1", "nips": "Accept (Oral)", "word": None,
    }  # fmt: skip


def test_every_id_of_the_iclr_2017_export_links_to_its_forum():
    export = SHARED_CORPORA / "openreview" / "ICLR17_submissions.csv"
    if not export.exists():
        pytest.skip(f"{export} is not here (a clone without ../shared)")
    with export.open(newline="", encoding="utf-8") as handle:
        ids = [row["PID"] for row in csv.DictReader(handle)]
    con = connect()
    con.execute(
        "create table papers as select unnest($ids) as paper_id, unnest($ids) as external_id, "
        "'PID' as id_field, 'ICLR' as venue, '0' as decision, "
        "[]::struct(url varchar, kind varchar)[] as links, null::varchar as title, "
        "null::varchar[] as authors, 2017 as year, null::varchar as abstract",
        {"ids": ids},
    )
    con.execute("create table topics as select 1 as topic_id, 'all' as label")
    con.execute("create table paper_topics as select paper_id, 1 as topic_id from papers")
    hits = read_hits.hits(con, [(p, 0.0) for p in ids], query=None)
    assert hits.height == 490
    assert hits["link"].to_list() == [f"https://openreview.net/forum?id={p}" for p in ids]


def test_a_version_without_id_field_still_has_its_cards():
    """Versions published before papers had id_field: every id reads as of no column."""
    con = papers_with_ids()
    con.execute("alter table papers drop column id_field")
    hits = read_hits.hits(con, [("pubmed", 0.0), ("doi", 0.0)])
    assert hits["link"].to_list() == [None, "https://doi.org/10.1103/PhysRevD.76.013009"]


def test_a_topic_filter_that_names_no_topic_says_so(sample_run):
    warehouse = str(sample_run.settings.warehouse)
    runner = CliRunner()
    result = runner.invoke(app, ["search", "decoding", "--topic", "banana", "-w", warehouse])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1
    assert result.output.startswith("error: no topic matches 'banana'")
    found = runner.invoke(app, ["search", "decoding", "--topic", "0", "-w", warehouse])
    assert found.exit_code == 0, found.output
