"""authors (sql/authors.sql): one row per author name as papers write it, normalised for case,
accents and spacing, with the papers, venues and years that list it."""

from __future__ import annotations

import json

import duckdb
import polars as pl

from flows.core.lake import open_lake, read_sql
from flows.core.settings import Settings
from tests.conftest import write


def authors_of(papers: pl.DataFrame) -> list[dict]:
    con = duckdb.connect()
    con.register("papers", papers)
    return con.execute(read_sql("authors")).pl().to_dicts()


def test_names_written_differently_are_one_author_and_initials_another():
    papers = pl.DataFrame(
        {
            "paper_id": ["p1", "p2", "p3"],
            "venue": ["ICLR", None, "NeurIPS"],
            "year": [2024, 2023, None],
            "authors": [
                ["José García", "Ann Lee"],
                ["Jose  GARCIA", " "],
                ["José García", "J. García"],
            ],  # fmt: skip
        },
        schema_overrides={"year": pl.Int32},
    )
    assert authors_of(papers) == [
        {"author_key": "ann lee", "name": "Ann Lee", "spellings": ["Ann Lee"], "papers": 1,
         "venues": ["ICLR"], "years": [2024], "paper_ids": ["p1"]},
        {"author_key": "j. garcia", "name": "J. García", "spellings": ["J. García"], "papers": 1,
         "venues": ["NeurIPS"], "years": [], "paper_ids": ["p3"]},
        {"author_key": "jose garcia", "name": "José García",
         "spellings": ["Jose GARCIA", "José García"], "papers": 3, "venues": ["ICLR", "NeurIPS"],
         "years": [2023, 2024], "paper_ids": ["p1", "p2", "p3"]},
    ]  # fmt: skip


def test_a_paper_without_authors_gives_no_author():
    papers = pl.DataFrame(
        {"paper_id": ["p1"], "venue": ["ICLR"], "year": [2024], "authors": [[]]},
        schema_overrides={"authors": pl.List(pl.String), "year": pl.Int32},
    )
    assert authors_of(papers) == []


def test_a_run_publishes_authors_checked_by_their_suite(prefect_server, tmp_path):
    from flows.pipeline import paperlake

    lines = [
        {"id": f"2401.0000{i}", "title": f"Paper number {i} on graph learning",
         "abstract": f"We study problem {i} of learning on graphs with message passing "
                     "networks and show that a simple spectral method matches strong baselines "
                     "on node classification while using fewer parameters and less memory.",
         "authors": authors, "venue": "ICLR", "year": 2024}
        for i, authors in enumerate([["Zoë Smith", "Li Wei"], ["Zoe Smith"], ["Li Wei"]])
    ]  # fmt: skip
    raw = write(tmp_path / "raw" / "papers.jsonl", "\n".join(map(json.dumps, lines)) + "\n")
    settings = Settings(raw=(raw.parent,), warehouse=tmp_path / "warehouse")
    paperlake(raw=[str(raw.parent)], warehouse=str(settings.warehouse))
    with open_lake(settings) as con:
        rows = con.execute(
            "select author_key, name, papers, venues, years from authors order by author_key"
        ).fetchall()
        checks = con.execute(
            "select count(*), bool_and(success) from dq_results where suite = 'authors'"
        ).fetchone()
    assert rows == [("li wei", "Li Wei", 2, ["ICLR"], [2024]),
                    ("zoe smith", "Zoe Smith", 2, ["ICLR"], [2024])]  # fmt: skip
    assert checks == (4, True)
