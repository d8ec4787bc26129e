"""The corpus report: figures from a tiny explicit warehouse, the CLI, and the page in Chromium."""

from __future__ import annotations

import re
import sys

import duckdb
import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.core.lake import open_lake
from flows.core.palette import topic_colour
from flows.read import write_report
from flows.read.figures import Change, gather, length_histogram
from flows.read.paper_map import MAP_PAD, project_2d, short_label
from flows.read.report import render
from tests.conftest import open_offline

runner = CliRunner()


def words(n: int, seed: str) -> str:
    return " ".join(f"{seed}{i}" for i in range(n))


def tiny_tables(with_mentions: bool = True, with_map: bool = True) -> dict[str, pl.DataFrame]:
    """Four papers at version 2: two topics, two venues, one near-duplicate pair; their map
    spans x in [-1, 1] and y in [-0.5, 0.5]."""
    ids = ["p1", "p2", "p3", "p4"]
    run_1, run_2 = "run-one", "run-two"
    tables = {
        "papers": pl.DataFrame(
            {
                "paper_id": ids,
                "venue": ["ICLR", "ICLR", "ICLR", "NeurIPS"],
                "year": [2026, 2026, 2026, 2025],
                "title": [None, "", "A titled paper", None],
                "abstract": [words(100, "a"), words(120, "b"), words(130, "c"), words(250, "d")],
                "word_count": [100, 120, 130, 250],
            }
        ),
        "embeddings": pl.DataFrame(
            {
                "paper_id": ids,
                "embedding": [[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.0, 1.0, 0.2], [0.0, 0.1, 1.0]],
            }
        ),
        "topics": pl.DataFrame(
            {
                "topic_id": [0, 1],
                "label": ["decoding, speed, tokens", "graphs, molecules, chemistry"],
                "top_terms": [["decoding", "speed", "tokens"], ["graphs", "molecules"]],
            }
        ),
        "paper_topics": pl.DataFrame({"paper_id": ids, "topic_id": [0, 0, 0, 1]}),
        "paper_coordinates": pl.DataFrame(
            {"paper_id": ids, "x": [-1.0, -0.6, 0.4, 1.0], "y": [0.5, 0.3, -0.5, 0.0]}
        ),
        "venue_stats": pl.DataFrame(
            {
                "venue": ["ICLR", "NeurIPS"],
                "year": [2026, 2025],
                "papers": [3, 1],
                "mean_words": [116.7, 250.0],
                "papers_with_code": [1, 0],
            }
        ),
        "duplicates": pl.DataFrame(
            {
                "paper_a": ["p1"],
                "paper_b": ["p2"],
                "score": [0.97],
                "kind": ["near"],
                "source_a": ["/raw/a.txt"],
                "line_a": [3],
                "source_b": ["/raw/b.txt"],
                "line_b": [9],
            }
        ),
        "runs": pl.DataFrame(
            {
                "run_id": [run_1, run_2],
                "snapshot_id": [1, 2],
                "started_at": ["2026-01-01 10:00:00", "2026-01-02 10:00:00"],
                "dq_outcome": ["passed", "passed with warnings"],
                "files": [1, 2],
                "records_seen": [3, 4],
                "accepted": [3, 4],
                "rejected": [0, 0],
            }
        ).with_columns(pl.col("started_at").str.to_datetime()),
        # Run one's results must not count for version 2.
        "dq_results": pl.DataFrame(
            {
                "run_id": [run_1, run_2, run_2, run_2, run_2],
                "suite": ["papers", "papers", "papers", "topics", "papers"],
                "expectation": ["e1", "e1", "e2", "e3", "e4"],
                "column_name": ["c", "c", "abstract", None, "flag_count"],
                "severity": ["critical", "critical", "critical", "warning", "warning"],
                "success": [False, True, True, True, False],
                "unexpected_count": [5, 0, 0, 0, 2],
                "unexpected_ids": [[], [], [], [], ["p3", "p4"]],
                "observed_value": pl.Series([None] * 5, dtype=pl.String),
            }
        ),
    }
    if not with_map:
        del tables["paper_coordinates"]  # versions published before maps were stored
    if with_mentions:
        tables["mentions"] = pl.DataFrame(
            {
                "paper_id": ["p1", "p1", "p2", "p3", "p3"],
                "kind": ["benchmark", "benchmark", "benchmark", "dataset", "benchmark"],
                "name": ["GSM8K", "GSM8K", "GSM8K", "ImageNet", "MMLU"],
                "value": pl.Series([None] * 5, dtype=pl.String),
                "context": ["x", "y", "z", "w", "v"],
            }
        )
    return tables


def tiny_connection(
    with_mentions: bool = True, with_map: bool = True, tables: dict | None = None
) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for name, frame in (tables or tiny_tables(with_mentions, with_map)).items():
        con.register("frame", frame)
        con.execute(f"create table {name} as select * from frame")
        con.unregister("frame")
    return con


def metrics(html: str, name: str) -> list[str]:
    """The text of every element carrying data-metric="name" (simple, flat elements)."""
    return re.findall(rf'data-metric="{name}"[^>]*>([^<]*)<', html)


def test_gather_tiny_warehouse():
    with tiny_connection() as con:
        figures = gather(con, version=2, seed=7)
        again = gather(con, version=2, seed=7)
    assert figures.version == 2
    assert figures.totals == {
        "papers": 4,
        "venues": 2,
        "median_words": 125.0,
        "embedded": 4,
        "topics": 2,
        "duplicates": 1,
    }
    assert [(t["topic_id"], t["papers"]) for t in figures.topics] == [(0, 3), (1, 1)]
    assert [(v["venue"], v["year"], v["papers"]) for v in figures.venues] == [
        ("ICLR", 2026, 3),
        ("NeurIPS", 2025, 1),
    ]
    assert figures.dq_by_severity == [
        {"severity": "critical", "passed": 2, "failed": 0},
        {"severity": "warning", "passed": 1, "failed": 1},
    ]
    assert (figures.dq_passed, figures.dq_failed) == (3, 1)
    assert [(r["expectation"], r["sample_ids"]) for r in figures.dq_failures] == [("e4", "p3, p4")]
    # Failing rows are named: a title, else the abstract's first 14 words.
    assert figures.dq_failures[0]["sample_rows"] == [
        {"key": "p3", "title": "A titled paper", "untitled": False},
        {"key": "p4", "title": words(14, "d") + "…", "untitled": True},
    ]
    assert figures.run["run_id"] == "run-two"
    assert figures.duplicates == [
        {
            "paper_a": "p1",
            "title_a": words(14, "a") + "…",  # no title
            "untitled_a": True,
            "paper_b": "p2",
            "title_b": words(14, "b") + "…",  # an empty title
            "untitled_b": True,
            "score": pytest.approx(0.97),
            "kind": "near",
            "location_a": "a.txt:3",
            "location_b": "b.txt:9",
        }
    ]
    # GSM8K: three mentions in two distinct papers.
    assert [(m["name"], m["papers"], m["mentions"]) for m in figures.mentions] == [
        ("GSM8K", 2, 3),
        ("ImageNet", 1, 1),
        ("MMLU", 1, 1),
    ]
    assert [(b["lo"], b["papers"]) for b in figures.lengths if b["papers"]] == [
        (100, 1),
        (120, 1),
        (130, 1),
        (250, 1),
    ]
    points = figures.paper_map.points
    assert [p["paper_id"] for p in points] == ["p1", "p2", "p3", "p4"]
    assert figures.paper_map == again.paper_map
    tips = {p["paper_id"]: p["tip"] for p in points}
    assert tips["p3"] == "A titled paper\np3"
    assert tips["p1"] == words(14, "a") + "…\np1"

    html = render(figures)
    assert metrics(html, "version") == ["2"]
    assert metrics(html, "papers") == ["4"]
    assert (metrics(html, "dq-passed"), metrics(html, "dq-failed")) == (["3"], ["1"])
    assert metrics(html, "duplicates") == ["1"]
    assert re.findall(r'data-metric="topic-papers" data-topic="(\d+)">(\d+)<', html) == [
        ("0", "3"),
        ("1", "1"),
    ]
    assert metrics(html, "mention-papers") == ["2", "1", "1"]
    assert html.count("<circle") == 4
    assert 'data-map-method="t-SNE"' in html and "PCA" not in html
    duplicates = html[html.index('<section id="duplicates">') :].split("</section>", 1)[0]
    pair = re.search(r'<tr data-pair="p1/p2">(.*?)</tr>', duplicates, re.S).group(1)
    assert re.findall(r'class="paper untitled" title="(\w+)" data-paper-title>([^<]*)<', pair) == [
        ("p1", words(14, "a") + "…"),
        ("p2", words(14, "b") + "…"),
    ]
    assert '<span class="pid">p1 · a.txt:3</span>' in pair
    failures = html[html.index('data-metric-row="dq-failure"') :].split("</tr>", 1)[0]
    assert 'title="p3" data-paper-title>A titled paper<' in failures
    assert "first version" in html  # no change figures were attached


def circles(html: str) -> dict[str, tuple[str, float, float]]:
    """paper id -> (fill, cx, cy) of every dot of the paper map."""
    found = re.findall(
        r'<circle class="pt" data-paper="(\w+)" data-topic="\d*" cx="([\d.]+)" cy="([\d.]+)"'
        r' r="[\d.]+" fill="([^"]+)">',
        html,
    )
    return {paper: (fill, float(cx), float(cy)) for paper, cx, cy, fill in found}


def test_map_draws_the_stored_coordinates():
    with tiny_connection() as con:
        figures = gather(con, version=2)
    html = render(figures)
    assert figures.paper_map.method == "t-SNE" and figures.paper_map.explained is None
    # x spans 2 and y 1: the viewBox is 960 wide and (960 - 2 * 18) / 2 + 2 * 18 = 498 high,
    # one unit is (960 - 2 * 18) / 2 = 462 px, and the origin is the box's centre, y up.
    assert 'viewBox="0 0 960 498"' in html
    dots = circles(html)
    assert set(dots) == {"p1", "p2", "p3", "p4"}  # one dot per paper of the version
    # p3 is stored at (0.4, -0.5): 480 + 0.4 * 462 and 249 + 0.5 * 462.
    assert dots["p3"][1:] == (664.8, 480.0)
    assert dots["p1"][1:] == (480 - 462, 249 - 0.5 * 462)
    assert {paper: fill for paper, (fill, _, _) in dots.items()} == {
        "p1": topic_colour(0),
        "p2": topic_colour(0),
        "p3": topic_colour(0),
        "p4": topic_colour(1),
    }
    # Each topic is labelled at the median place of its papers (p2's, for topic 0); topic
    # 1's label is pulled in from the right edge so that it stays inside the box.
    labels = re.findall(
        r'<text class="topic-label" data-topic="(\d+)" x="([\d.]+)" y="([\d.]+)">([^<]*)<', html
    )
    assert labels == [
        ("0", "202.8", "110.4", "decoding, speed"),
        ("1", "897.2", "249.0", "graphs, molecules"),  # 960 - 2 - (17 * 6.8 / 2 + 3)
    ]
    legend = re.findall(
        r'<li data-topic="(\d+)"><span class="swatch" style="background:([^"]+)">'
        r"</span><span><b>([^<]*)</b>([^<]*)</span>",
        html,
    )
    assert legend == [
        ("0", topic_colour(0), "decoding, speed", ", tokens"),
        ("1", topic_colour(1), "graphs, molecules", ", chemistry"),
    ]
    caption = html[html.index('<section id="map">') :].split("</svg>", 1)[0]
    assert "t-SNE of the\n    abstracts' embeddings made when this version was published" in caption
    assert "papers near each other have\n    similar abstracts" in caption


def test_map_reads_no_scikit_learn_when_coordinates_are_stored(monkeypatch):
    # None in sys.modules makes any import of the module fail.
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.decomposition", None)
    with tiny_connection() as con:
        assert len(gather(con, version=2).paper_map.points) == 4
    with tiny_connection(with_map=False) as con, pytest.raises(ImportError, match="sklearn"):
        gather(con, version=2)


def test_map_of_a_version_without_coordinates_is_a_pca_and_says_so():
    with tiny_connection(with_map=False) as con:
        figures = gather(con, version=2, seed=7)
        again = gather(con, version=2, seed=7)
    assert figures.paper_map.method == "PCA"
    assert figures.paper_map == again.paper_map  # the projection is deterministic
    first, second = figures.paper_map.explained
    assert first >= second > 0 and first + second <= 1
    html = render(figures)
    assert set(circles(html)) == {"p1", "p2", "p3", "p4"}
    assert len(re.findall('<text class="topic-label"', html)) == 2
    caption = html[html.index('<section id="map">') :].split("</p>", 1)[0]
    assert 'data-map-method="PCA"' in caption
    assert "no <code>paper_coordinates</code>" in caption
    assert f"axes explain\n    {first * 100:.0f}% and {second * 100:.0f}%" in caption


def many_topic_tables(n: int) -> dict[str, pl.DataFrame]:
    """tiny_tables with n papers, one in each of n topics, around a circle."""
    tables = tiny_tables()
    ids = [f"q{i:02d}" for i in range(n)]
    angles = np.linspace(0, 2 * np.pi, n, endpoint=False)
    tables["papers"] = pl.DataFrame(
        {
            "paper_id": ids,
            "venue": ["ICLR"] * n,
            "year": [2026] * n,
            "title": [f"Paper {i}" for i in range(n)],
            "abstract": [words(100, f"w{i}_") for i in range(n)],
            "word_count": [100] * n,
        }
    )
    tables["embeddings"] = pl.DataFrame(
        {"paper_id": ids, "embedding": [[float(i == j) for j in range(n)] for i in range(n)]}
    )
    tables["topics"] = pl.DataFrame(
        {
            "topic_id": list(range(n)),
            "label": [f"term{i}, other{i}, third{i}" for i in range(n)],
            "top_terms": [[f"term{i}"] for i in range(n)],
        }
    )
    tables["paper_topics"] = pl.DataFrame({"paper_id": ids, "topic_id": list(range(n))})
    tables["paper_coordinates"] = pl.DataFrame(
        {"paper_id": ids, "x": np.cos(angles).round(5), "y": np.sin(angles).round(5)}
    )
    return tables


def test_map_gives_every_topic_its_own_colour_and_label():
    n = 13  # more than any fixed ten-colour palette holds
    with tiny_connection(tables=many_topic_tables(n)) as con:
        html = render(gather(con, version=2))
    dots = circles(html)
    assert len(dots) == n
    assert len({fill for fill, _, _ in dots.values()}) == n
    legend = r'<li data-topic="\d+"><span class="swatch" style="background:([^"]+)"'
    swatches = re.findall(legend, html)
    assert sorted(swatches) == sorted(fill for fill, _, _ in dots.values())
    labels = re.findall(r'<text class="topic-label" data-topic="(\d+)"[^>]*>([^<]*)<', html)
    assert sorted(labels) == sorted((str(i), f"term{i}, other{i}") for i in range(n))


def test_short_label_takes_two_terms_unless_the_second_repeats_a_word():
    assert short_label("decoding, speed, tokens", 0) == "decoding, speed"
    assert short_label("adversarial network, generative adversarial, gan", 3) == (
        "adversarial network"
    )
    assert short_label("graphs", 1) == "graphs"
    assert short_label(None, 4) == "topic 4"


def test_what_changed_lists_papers_by_name():
    with tiny_connection() as con:
        figures = gather(con, version=2)
    figures.previous = 1
    figures.change = Change(
        previous=1,
        added=12,  # more than the report lists
        removed=1,
        changed=1,
        groups=[],
        new_duplicates=0,
        papers=[
            {
                "change": "added",
                "old_id": None,
                "new_id": "p3",
                "title": "A titled paper",
                "untitled": False,
            },
            {
                "change": "changed",
                "old_id": "p0",
                "new_id": "p1",
                "title": "a0 a1…",
                "untitled": True,
            },
            {
                "change": "removed",
                "old_id": "p9",
                "new_id": None,
                "title": "Gone",
                "untitled": False,
            },
        ],
    )
    changes = render(figures).split('<section id="changes">', 1)[1].split("</section>", 1)[0]
    rows = re.findall(r'<tr data-change="(\w+)">(.*?)</tr>', changes, re.S)
    names = [
        (
            change,
            *re.search(r'class="([\w ]+)" title="(\w+)" data-paper-title>([^<]*)<', row).groups(),
        )
        for change, row in rows
    ]
    assert names == [
        ("added", "paper", "p3", "A titled paper"),
        ("changed", "paper untitled", "p1", "a0 a1…"),
        ("removed", "paper", "p9", "Gone"),
    ]
    assert '<span class="pid">p1 · was p0</span>' in changes
    assert "… and 11 more added" in changes


def test_report_without_mentions_table_says_so():
    with tiny_connection(with_mentions=False) as con:
        figures = gather(con, version=2)
    assert figures.mentions is None
    assert "No mentions table in this version." in render(figures)


def test_length_histogram_uses_round_bins():
    assert length_histogram([]) == []
    bins = length_histogram([3, 7, 7, 18], bins=4)
    assert bins == [
        {"lo": 0, "hi": 5, "papers": 1},
        {"lo": 5, "hi": 10, "papers": 2},
        {"lo": 10, "hi": 15, "papers": 0},
        {"lo": 15, "hi": 20, "papers": 1},
    ]


def test_projection_of_one_paper_is_a_point():
    xy, explained = project_2d(np.ones((1, 4), dtype=np.float32), seed=1)
    assert xy.shape == (1, 2) and explained == (0.0, 0.0)


def test_cli_report_writes_the_default_file(sample_run):
    warehouse = sample_run.settings.warehouse
    result = runner.invoke(app, ["report", "-w", str(warehouse)])
    path = warehouse / "report-v1.html"
    try:
        assert result.exit_code == 0, result.output
        assert result.output.strip() == str(path)
        html = path.read_text()
        assert "This is the first version" in html
        assert "No mentions table in this version." in html or "mention-papers" in html
    finally:
        path.unlink(missing_ok=True)


def test_cli_report_of_an_unknown_version_fails(sample_run):
    result = runner.invoke(
        app, ["report", "-w", str(sample_run.settings.warehouse), "--version", "99"]
    )
    assert result.exit_code == 1
    assert "version 99 is not a published version (published: 1)" in result.output


def test_cli_report_without_a_warehouse_fails(tmp_path):
    result = runner.invoke(app, ["report", "-w", str(tmp_path / "none")])
    assert result.exit_code == 1 and "no warehouse at" in result.output


def warehouse_figures(settings) -> dict:
    """The numbers the report must show, straight from the warehouse with SQL."""
    with open_lake(settings, 1) as con:

        def one(sql: str):
            return con.execute(sql).fetchone()[0]

        dq = con.execute(
            "select count(*) filter (where success), count(*) filter (where not success) "
            "from dq_results join runs using (run_id) where runs.snapshot_id = 1"
        ).fetchone()
        return {
            "papers": one("select count(*) from papers"),
            "embedded": one("select count(*) from embeddings"),
            "duplicates": one("select count(*) from duplicates"),
            "topics": dict(
                con.execute("select topic_id, count(*) from paper_topics group by 1").fetchall()
            ),
            "venues": {
                (venue, year): n
                for venue, year, n in con.execute(
                    "select venue, year, count(*) from papers group by all"
                ).fetchall()
            },
            "dq": dq,
            "coordinates": {
                paper: (x, y)
                for paper, x, y in con.execute(
                    "select paper_id, x, y from paper_coordinates"
                ).fetchall()
            },
        }


def test_report_in_chromium_matches_the_warehouse(chromium, sample_run, tmp_path):
    path = write_report(sample_run.settings, None, tmp_path / "report.html")
    expected = warehouse_figures(sample_run.settings)

    opened = open_offline(chromium, path)
    page, errors, requests = opened.page, opened.errors, opened.requests
    shown = page.eval_on_selector_all(
        "[data-metric]",
        "els => els.map(e => ({metric: e.dataset.metric, text: e.textContent.trim(),"
        " topic: e.dataset.topic, venue: e.dataset.venue, year: e.dataset.year}))",
    )

    def values(metric: str) -> list[dict]:
        return [s for s in shown if s["metric"] == metric]

    def single(metric: str) -> int:
        (item,) = values(metric)
        return int(item["text"])

    assert single("version") == 1
    assert single("papers") == expected["papers"] == 38
    assert single("duplicates") == expected["duplicates"]
    assert (single("dq-passed"), single("dq-failed")) == expected["dq"]
    assert expected["dq"][0] > 0
    assert {int(s["topic"]): int(s["text"]) for s in values("topic-papers")} == expected["topics"]
    assert {
        (s["venue"], int(s["year"])): int(s["text"]) for s in values("venue-papers")
    } == expected["venues"]
    # One dot per paper, each where paper_coordinates puts it in the viewBox.
    dots = page.eval_on_selector_all(
        "#paper-map circle",
        "els => els.map(e => [e.dataset.paper, +e.getAttribute('cx'), +e.getAttribute('cy')])",
    )
    assert len(dots) == len({paper for paper, _, _ in dots}) == expected["papers"]
    stored = expected["coordinates"]
    assert {paper for paper, _, _ in dots} == set(stored)
    width, height = map(float, page.get_attribute("#paper-map", "viewBox").split()[2:])
    xy = np.array(list(stored.values()))
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    scale = min((width - 2 * MAP_PAD) / (hi - lo)[0], (height - 2 * MAP_PAD) / (hi - lo)[1])
    paper, cx, cy = dots[len(dots) // 2]
    x, y = stored[paper]
    assert cx == pytest.approx(width / 2 + (x - (lo[0] + hi[0]) / 2) * scale, abs=0.06)
    assert cy == pytest.approx(height / 2 - (y - (lo[1] + hi[1]) / 2) * scale, abs=0.06)
    assert "t-SNE" in page.locator("#map .note").inner_text()
    # A label per topic that has papers, in the box.
    labels = page.eval_on_selector_all(
        "#paper-map .topic-label",
        "els => els.map(e => { const b = e.getBBox(); return [e.dataset.topic, b.x, b.width]; })",
    )
    assert {int(topic) for topic, _, _ in labels} == set(expected["topics"])
    for _, left, text_width in labels:
        assert left >= 0 and left + text_width <= width
    dot = page.locator("#paper-map circle").first
    name, paper_id = dot.locator("title").text_content().split("\n")
    assert paper_id == dot.get_attribute("data-paper") and len(name.split()) >= 3
    assert "first version" in page.locator("#changes").inner_text()

    # The legend's script runs: hovering a topic focuses the map on it.
    page.hover(".legend li >> nth=0")
    assert "focus" in page.get_attribute("#paper-map", "class")

    assert errors == []
    assert requests == []
    page.close()
