"""The explorer: its JSON API on a real two-version warehouse, and the page in Chromium
against the real server started by `paperlake explore`, offline."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from flows.core.lake import WarehouseError, open_lake
from flows.core.settings import PROJECT_ROOT, Settings
from flows.read import search_papers
from flows.serve.explorer import Explorer
from flows.serve.explorer_app import create_app
from tests.conftest import SAMPLE_RAW

# The sample's paper whose abstract starts so, and a reworded copy of it with a title,
# authors and an arXiv id: its near-duplicate in version 2.
NEON_START = "Scaling generative AI models is bottlenecked"
TWIN = {
    "id": "2501.01234",
    "title": "Neon: Negative Extrapolation From Self-Training",
    "authors": ["Ada Lovelace", "Alan Turing"],
    "venue": "ICLR",
    "year": 2026,
}
OTHER = {
    "id": "2501.04321",
    "title": "Ocean Tides of Jupiter's Moons",
    "authors": ["Grace Hopper"],
    "venue": "ICLR",
    "year": 2026,
    "abstract": (
        "We model ocean tides on the icy moons of Jupiter, Europa and Ganymede, from orbital "
        "resonance and ice shell thickness. Tidal heating estimates bound the depth of the "
        "subsurface oceans, and we predict the magnetic induction signal that a flyby "
        "spacecraft would measure near each moon over one orbit."
    ),
}


@pytest.fixture(scope="module")
def lake(prefect_server, tmp_path_factory):
    """Version 1: data/raw (38 papers). Version 2: plus a titled near-duplicate of one
    sample paper and one paper on another subject (40 papers)."""
    from flows.pipeline import paperlake

    root = tmp_path_factory.mktemp("explore")
    raw, warehouse = root / "raw", root / "warehouse"
    shutil.copytree(SAMPLE_RAW, raw)
    paperlake(raw=[str(raw)], warehouse=str(warehouse))
    neon = next(p for p in (SAMPLE_RAW).iterdir() if NEON_START in p.read_text())
    abstract = next(b for b in neon.read_text().split("\n\n") if b.startswith(NEON_START))
    twin = TWIN | {"abstract": abstract.replace("Unfortunately, however,", "However,")}
    (raw / "extra.jsonl").write_text(json.dumps(twin) + "\n" + json.dumps(OTHER) + "\n")
    paperlake(raw=[str(raw)], warehouse=str(warehouse))
    settings = Settings(warehouse=warehouse, raw=(raw,))
    with open_lake(settings) as con:
        ids = dict(
            con.execute(
                "select coalesce(external_id, 'neon'), paper_id from papers "
                "where external_id is not null or abstract like ?",
                [NEON_START + "%"],
            ).fetchall()
        )
    return settings, ids


@pytest.fixture(scope="module")
def client(lake):
    explorer = Explorer(lake[0])
    with TestClient(create_app(explorer)) as client:
        yield client
    explorer.close()


def test_versions_are_the_published_ones_newest_first(client):
    body = client.get("/api/versions").json()
    assert body["default"] == 2
    assert [(v["version"], v["papers"]) for v in body["versions"]] == [(2, 40), (1, 38)]


def test_search_hit_carries_title_authors_link_topic_and_score(client, lake):
    _, ids = lake
    body = client.get("/api/search", params={"q": "negative extrapolation self-training"}).json()
    assert body["version"] == 2 and body["query"] == "negative extrapolation self-training"
    top = {hit["paper_id"]: hit for hit in body["hits"][:2]}
    assert set(top) == {ids["2501.01234"], ids["neon"]}  # the paper and its reworded twin
    twin = top[ids["2501.01234"]]
    assert twin["title"] == TWIN["title"] and twin["untitled"] is False
    assert twin["authors"] == ["Ada Lovelace", "Alan Turing"]
    assert twin["link"] == "https://arxiv.org/abs/2501.01234"
    assert (twin["venue"], twin["year"]) == ("ICLR", 2026)
    assert isinstance(twin["topic_id"], int) and twin["topic"]
    assert isinstance(twin["score"], float)
    untitled = top[ids["neon"]]
    assert untitled["untitled"] is True and untitled["title"].startswith(NEON_START)


def test_filters_narrow_the_hits(client, lake):
    _, ids = lake
    topic = client.get(f"/api/paper/{ids['2501.01234']}").json()["topic_id"]
    hits = client.get("/api/search", params={"q": "learning", "k": 50, "topic": topic}).json()
    assert hits["hits"] and {h["topic_id"] for h in hits["hits"]} == {topic}
    assert hits["filters"] == {"venue": None, "year": None, "topic": topic}
    year = client.get("/api/search", params={"q": "learning", "year": 2026}).json()
    assert len(year["hits"]) == 10 and {h["year"] for h in year["hits"]} == {2026}
    none = client.get("/api/search", params={"q": "learning", "venue": "NeurIPS"}).json()
    assert none["hits"] == [] and none["no_good_match"] is True


SAME = ("paper_id", "score", "bm25", "all_words", "good_match", "no_good_match", "topic_id")


def test_warm_search_answers_as_search_does_and_needs_no_catalog(lake):
    """The explorer's held copy of a version (flows/read/search.py's Corpus) gives the hits
    that flows.read.search_papers gives on the catalog, and keeps answering once the catalog
    is let go."""
    settings, ids = lake
    explorer = Explorer(settings)
    try:
        for version in (1, 2):
            with open_lake(settings, version) as con:
                topic = con.execute("select max(topic_id) from topics").fetchone()[0]
                cases = [
                    ("negative extrapolation self-training", {}),
                    ("speculative decoding", {"k": 5, "mode": "dense"}),
                    ("chain of thought", {"k": 3, "mode": "keyword"}),
                    ("graph neural networks for molecules", {"k": 20}),
                    ("learning", {"k": 50, "year": 2026}),
                    ("learning", {"venue": "iclr", "mode": "keyword"}),
                    ("learning", {"venue": "NeurIPS"}),
                    ("language models", {"k": 50, "topic": topic}),
                ]
                expected = {
                    (text, str(options)): search_papers(con, text, settings, **options)
                    for text, options in cases
                }
            explorer.hold(version)
            explorer.release()  # what is held needs no connection to the catalog
            for text, options in cases:
                body = explorer.search(text, version, **options)
                got = [tuple(hit[c] for c in SAME) for hit in body["hits"]]
                want = expected[text, str(options)].select(SAME).rows()
                assert got == want, (version, text, options)
                assert (want == []) == (options.get("venue") == "NeurIPS")
            assert not explorer.lakes
    finally:
        explorer.close()
    assert expected[cases[0][0], "{}"]["paper_id"][0] in {ids["neon"], ids["2501.01234"]}


def test_paper_page_has_nearest_duplicates_and_its_raw_record(client, lake):
    settings, ids = lake
    twin = ids["2501.01234"]
    paper = client.get(f"/api/paper/{twin}").json()
    assert paper["title"] == TWIN["title"] and paper["external_id"] == "2501.01234"
    assert paper["links"] == [{"url": "https://arxiv.org/abs/2501.01234", "kind": "paper"}]
    with open_lake(settings) as con:
        stored = con.execute(
            "select neighbor_id, rank from neighbors where paper_id = ? order by rank", [twin]
        ).fetchall()
        topic = con.execute(
            "select label from paper_topics join topics using (topic_id) where paper_id = ?",
            [twin],
        ).fetchone()[0]
    assert [(n["paper_id"], n["rank"]) for n in paper["nearest"]] == stored
    assert len(stored) == 10 and paper["nearest"][0]["paper_id"] == ids["neon"]
    assert paper["topic"] == topic
    [duplicate] = paper["duplicates"]
    assert duplicate["paper_id"] == ids["neon"] and duplicate["kind"] == "near"
    assert duplicate["score"] >= settings.duplicate_threshold
    assert duplicate["group_size"] == 2
    [source] = paper["sources"]
    assert Path(source["source_path"]).name == "extra.jsonl"
    assert (source["record_no"], source["line"], source["byte_offset"], source["first"]) == (
        1, 1, 0, True,
    )  # fmt: skip
    assert source["format"].startswith("jsonl")


def test_similar_searches_by_the_papers_own_vector(client, lake):
    _, ids = lake
    body = client.get(f"/api/similar/{ids['neon']}", params={"k": 3}).json()
    assert [h["paper_id"] for h in body["hits"]][0] == ids["2501.01234"]
    assert len(body["hits"]) == 3 and ids["neon"] not in [h["paper_id"] for h in body["hits"]]


def test_map_has_one_point_per_paper_and_old_papers_keep_their_places(client, lake):
    v2 = client.get("/api/map").json()
    v1 = client.get("/api/map", params={"version": 1}).json()
    assert (len(v2["points"]["paper_id"]), len(v1["points"]["paper_id"])) == (40, 38)
    place = {2: {}, 1: {}}
    for version, body in ((2, v2), (1, v1)):
        points = body["points"]
        assert all(-1 <= c <= 1 for c in points["x"] + points["y"])
        xy = zip(points["x"], points["y"], strict=True)
        place[version] = dict(zip(points["paper_id"], xy, strict=True))
    assert {pid: place[2][pid] for pid in place[1]} == place[1]  # 2 new of 40: kept
    labels = {t["topic_id"]: t["label"] for t in v2["topics"]}
    assert set(v2["points"]["topic_id"]) == set(labels)
    assert sum(t["papers"] for t in v2["topics"]) == 40


def test_unknown_paper_is_a_404_naming_it(client):
    response = client.get("/api/paper/deadbeef00000000")
    assert response.status_code == 404
    assert response.json() == {
        "error": "no paper deadbeef00000000 in version 2",
        "paper_id": "deadbeef00000000",
        "version": 2,
    }
    assert client.get("/api/similar/deadbeef00000000").status_code == 404


def test_version_1_does_not_hold_the_new_papers(client, lake):
    _, ids = lake
    response = client.get(f"/api/paper/{ids['2501.01234']}", params={"version": 1})
    assert response.status_code == 404
    assert response.json()["error"] == f"no paper {ids['2501.01234']} in version 1"
    assert client.get("/api/overview", params={"version": 1}).json()["papers"] == 38


def test_bad_requests_say_why(client, lake):
    response = client.get("/api/map", params={"version": 9})
    assert response.status_code == 404
    assert response.json() == {
        "error": "version 9 is not a published version (published: 1, 2)",
        "version": 9,
    }
    empty = client.get("/api/search", params={"q": "  "})
    assert (empty.status_code, empty.json()) == (400, {"error": "give some words to search for"})
    assert client.get("/api/search", params={"q": "x", "mode": "magic"}).status_code == 400
    assert client.get("/api/nothing").json() == {"error": "no API endpoint /api/nothing"}
    with pytest.raises(WarehouseError, match=r"version 9 is not a published version"):
        Explorer(lake[0], version=9)


def test_pages_and_assets_are_served_from_here(client):
    page = client.get("/paper/anything")
    assert page.status_code == 200 and 'data-default-version="2"' in page.text
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert sorted(assets) == ["/", "/static/explore/app.css", "/static/explore/app.js", "data:,"]
    for asset in ("/static/explore/app.css", "/static/explore/app.js"):
        assert client.get(asset).status_code == 200
    script = client.get("/static/explore/app.js").text
    assert "http://" not in script.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in script


@pytest.fixture(scope="module")
def server(lake):
    """`paperlake explore --port 0` in its own process: its URL, the process, its output."""
    settings, _ = lake
    command = [sys.executable, "-m", "flows.cli", "explore", "-w", str(settings.warehouse),
               "--port", "0"]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=os.environ | {"COLUMNS": "200"},
    )  # fmt: skip
    first = process.stdout.readline()
    found = re.search(r"paperlake explorer: (http://127\.0\.0\.1:\d+/)", first)
    if not found:
        process.kill()
        pytest.fail(f"the explorer did not start: {first}{process.stdout.read()}")
    yield found.group(1), process
    if process.poll() is None:
        process.kill()
        process.wait()


def test_explorer_in_chromium_searches_opens_a_paper_and_maps_every_paper(chromium, server, lake):
    base, _ = server
    _, ids = lake
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    outside: list[str] = []
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def only_the_server(route):
        if route.request.url.startswith(base):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_server)
    page.goto(base)
    page.wait_for_selector("#map circle", state="attached")
    assert page.locator("#map circle").count() == 40
    assert page.locator("#map text").count() == page.locator(".stats b").nth(1).evaluate(
        "b => Number(b.textContent)"
    )  # a label per topic

    page.fill("#q", "negative extrapolation self-training")
    page.press("#q", "Enter")
    page.wait_for_selector("li.hit")
    assert "q=negative+extrapolation+self-training" in page.url
    first = page.locator("li.hit").first
    assert first.get_attribute("data-paper") in {ids["2501.01234"], ids["neon"]}
    assert (
        page.locator(f'li.hit[data-paper="{ids["2501.01234"]}"]')
        .inner_text()
        .count("Ada Lovelace, Alan Turing")
        == 1
    )
    assert page.locator("#map circle.lit").count() == page.locator("li.hit").count()

    page.locator(f'li.hit[data-paper="{ids["2501.01234"]}"] a[data-nav]').first.click()
    page.wait_for_selector("#nearest li.hit")
    assert page.url == f"{base}paper/{ids['2501.01234']}"
    assert page.inner_text("article h1") == TWIN["title"]
    assert page.locator("#nearest li.hit").count() == 10
    assert page.locator("#duplicates li.hit").get_attribute("data-paper") == ids["neon"]
    assert "extra.jsonl" in page.inner_text("#sources")
    assert page.locator("#map circle").count() == 40
    assert page.locator("#map circle.focus").get_attribute("data-paper") == ids["2501.01234"]

    page.go_back()  # the search again, from the address
    page.wait_for_selector("li.hit")
    assert page.input_value("#q") == "negative extrapolation self-training"

    page.select_option("#version", "1")  # version 1: 38 papers on the map
    page.wait_for_function("document.querySelectorAll('#map circle').length === 38")
    assert "v=1" in page.url
    other = page.locator("#map circle").nth(5)
    pid = other.get_attribute("data-paper")
    other.dispatch_event("click")
    page.wait_for_selector(f'article[data-paper="{pid}"]')
    assert page.url == f"{base}paper/{pid}?v=1"

    page.goto(f"{base}paper/deadbeef00000000")
    page.wait_for_selector("#error:not([hidden])")
    assert page.inner_text("#error") == "no paper deadbeef00000000 in version 2"
    errors = [e for e in errors if "404" not in e]  # the page's own 404 above
    page.close()
    assert outside == [] and errors == []


def test_explore_stops_cleanly_on_sigint(server):
    _, process = server
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    assert output.strip().splitlines()[-1] == "stopped: the explorer"
    assert "Traceback" not in output


def test_explore_refuses_a_bad_version_and_a_busy_port(lake, tmp_path):
    from typer.testing import CliRunner

    from flows.cli import app

    settings, _ = lake
    result = CliRunner().invoke(app, ["explore", "-w", str(settings.warehouse), "--version", "7"])
    assert result.exit_code == 1
    assert "version 7 is not a published version (published: 1, 2)" in said(result)
    empty = CliRunner().invoke(app, ["explore", "-w", str(tmp_path / "none")])
    assert empty.exit_code == 1 and "run `paperlake run` first" in said(empty)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = CliRunner().invoke(
            app, ["explore", "-w", str(settings.warehouse), "--port", str(port)]
        )
    assert busy.exit_code == 1
    assert f"cannot listen on 127.0.0.1:{port} (Address already in use)" in said(busy)


def said(result) -> str:
    """A command's output with the terminal's line wrapping undone."""
    return " ".join(result.output.split())


def test_a_missing_data_file_is_named_in_the_answer_not_a_500(sample_run, tmp_path):
    warehouse = tmp_path / "warehouse"
    shutil.copytree(sample_run.settings.warehouse, warehouse)
    (lost,) = (warehouse / "data" / "main" / "topics").glob("*.parquet")
    lost.unlink()
    explorer = Explorer(Settings(warehouse=warehouse))
    try:
        with TestClient(create_app(explorer), raise_server_exceptions=False) as client:
            answers = [client.get(f"/api/{path}") for path in ("overview", "topic/1", "map")]
    finally:
        explorer.close()
    assert {a.status_code for a in answers} == {503}
    for answer in answers:
        assert answer.json()["error"].startswith(f"data file {lost}")
        assert "is missing: run `paperlake doctor`" in answer.json()["error"]
