"""The explorer: its JSON API on a real two-version warehouse, and the page in Chromium
against the real server started by `paperlake explore`, offline."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import socket
import urllib.request
from pathlib import Path

import polars as pl
import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from flows.core.lake import WarehouseError, open_lake
from flows.core.palette import category_colour, sequential_colours, topic_colour
from flows.core.settings import Settings
from flows.read import search_papers
from flows.serve.explorer import MAX_HITS, Explorer
from flows.serve.explorer_app import create_app
from flows.serve.explorer_map import topic_names
from tests.conftest import SAMPLE_RAW, explorer_process, read_map

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
    "authors": ["Grace Hopper", "Jose  GARCIA"],
    "venue": "ICLR",
    "year": 2026,
    "abstract": (
        "We model ocean tides on the icy moons of Jupiter, Europa and Ganymede, from orbital "
        "resonance and ice shell thickness. Tidal heating estimates bound the depth of the "
        "subsurface oceans, and we predict the magnetic induction signal that a flyby "
        "spacecraft would measure near each moon over one orbit."
    ),
}
# Another venue and year, by the same two authors (one of them written another way).
THIRD = {
    "id": "2312.07777",
    "title": "Crop Yield Forecasts from Satellite Images",
    "authors": ["José García", "Grace Hopper"],
    "venue": "TMLR",
    "year": 2024,
    "abstract": (
        "We forecast wheat and maize yields per field from a season of satellite images, "
        "rainfall and soil records. A model trained on ten growing seasons predicts the "
        "harvest two months ahead, and its errors are largest in years of late frost and "
        "drought, which we trace to sparse cloud-free images in spring."
    ),
}


@pytest.fixture(scope="module")
def lake(prefect_server, tmp_path_factory):
    """Version 1: data/raw (38 papers, ICLR 2026, untitled, no authors). Version 2: plus a
    titled near-duplicate of one sample paper and two papers on other subjects, one of
    them of TMLR 2024 (41 papers)."""
    from flows.pipeline import paperlake

    root = tmp_path_factory.mktemp("explore")
    raw, warehouse = root / "raw", root / "warehouse"
    shutil.copytree(SAMPLE_RAW, raw)
    paperlake(raw=[str(raw)], warehouse=str(warehouse))
    neon = next(p for p in (SAMPLE_RAW).iterdir() if NEON_START in p.read_text())
    abstract = next(b for b in neon.read_text().split("\n\n") if b.startswith(NEON_START))
    twin = TWIN | {"abstract": abstract.replace("Unfortunately, however,", "However,")}
    extra = "".join(json.dumps(paper) + "\n" for paper in (twin, OTHER, THIRD))
    (raw / "extra.jsonl").write_text(extra)
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
    assert [(v["version"], v["papers"]) for v in body["versions"]] == [(2, 41), (1, 38)]


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
    that flows.read.search_papers gives on the catalog (the explorer ranks MAX_HITS and
    pages through them), and keeps answering once the catalog is let go."""
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
                    (text, str(options)): search_papers(
                        con, text, settings, **(options | {"k": MAX_HITS})
                    ).head(options.get("k", 10))
                    for text, options in cases
                }
            explorer.hold(version)
            explorer.release()  # what is held needs no connection to the catalog
            for text, options in cases:
                filters = {key: options.get(key) for key in ("venue", "year", "topic")}
                k, mode = options.get("k", 10), options.get("mode", "hybrid")
                body = explorer.search(text, version, k, mode, filters)
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


def mapped(client, version: int) -> tuple[dict, list[str]]:
    """/api/map of a version as the page reads it, and the id of the paper at each index of
    the map, as /api/map/paper names it."""
    body = read_map(client.get("/api/map", params={"version": version}).content)
    named = [client.get(f"/api/map/paper/{i}", params={"version": version}).json()
             for i in range(body["papers"])]  # fmt: skip
    assert [paper["index"] for paper in named] == list(range(body["papers"]))
    return body, [paper["paper_id"] for paper in named]


def test_map_has_one_point_per_paper_and_old_papers_keep_their_places(client, lake):
    (v2, ids2), (v1, ids1) = mapped(client, 2), mapped(client, 1)
    assert (v2["papers"], v1["papers"]) == (41, 38) and (v2["version"], v1["version"]) == (2, 1)
    place = {}
    for version, body, ids in ((2, v2, ids2), (1, v1, ids1)):
        points = body["points"]
        assert ids == sorted(set(ids))  # the map's order: paper_id order
        assert all(-1 <= c <= 1 for c in [*points["x"], *points["y"]])
        xy = zip(points["x"].tolist(), points["y"].tolist(), strict=True)
        place[version] = dict(zip(ids, xy, strict=True))
    assert {pid: place[2][pid] for pid in place[1]} == place[1]  # 3 new of 41: kept
    with open_lake(lake[0], 2) as con:
        places = con.table("paper_coordinates").pl()
        topic_of = dict(con.table("paper_topics").pl().select("paper_id", "topic_id").rows())
    xy = places.select("paper_id", pl.col("x", "y").cast(pl.Float32)).rows()
    assert place[2] == {pid: (x, y) for pid, x, y in xy}  # the query's, as float32
    topics = [t["topic_id"] for t in v2["topics"]]
    assert min(v2["points"]["topic"]) >= 0
    assert {pid: topics[t] for pid, t in zip(ids2, v2["points"]["topic"], strict=True)} == topic_of
    assert sum(t["papers"] for t in v2["topics"]) == 41
    asked = ",".join([ids2[5], ids2[0], "deadbeef00000000", ids2[5]])
    indexes = client.get("/api/map/indexes", params={"ids": asked}).json()
    assert indexes == {"version": 2, "indexes": {ids2[5]: 5, ids2[0]: 0}}
    new = next(pid for pid in ids2 if pid not in ids1)  # not on version 1's map
    asked = {"ids": f"{new},{ids1[3]}", "version": 1}
    assert client.get("/api/map/indexes", params=asked).json() == {
        "version": 1, "indexes": {ids1[3]: 3},
    }  # fmt: skip


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
    assert client.get("/api/map/paper/41").json() == {
        "error": "no paper at index 41 of the map of version 2"
    }
    assert client.get("/api/map/paper/0", params={"version": 9}).status_code == 404
    empty = client.get("/api/search", params={"q": "  "})
    assert (empty.status_code, empty.json()) == (400, {"error": "give some words to search for"})
    assert client.get("/api/search", params={"q": "x", "mode": "magic"}).status_code == 400
    assert client.get("/api/nothing").json() == {"error": "no API endpoint /api/nothing"}
    with pytest.raises(WarehouseError, match=r"version 9 is not a published version"):
        Explorer(lake[0], version=9)


def listing(client, **params) -> list[dict]:
    """Every page of /api/papers with these parameters, 20 papers a page, in order."""
    hits, offset = [], 0
    while True:
        body = client.get("/api/papers", params=params | {"offset": offset}).json()
        hits += body["hits"]
        offset += 20
        if offset >= body["total"]:
            return hits


def test_papers_without_a_query_come_a_page_at_a_time_in_the_order_asked(client, lake):
    _, ids = lake
    first = client.get("/api/papers").json()
    assert (first["total"], first["sort"], first["offset"], len(first["hits"])) == (
        41,
        "year",
        0,
        20,
    )
    second = client.get("/api/papers", params={"offset": 20}).json()
    assert second["offset"] == 20 and len(second["hits"]) == 20
    every = listing(client)
    assert [h["paper_id"] for h in every[:40]] == [
        h["paper_id"] for h in first["hits"] + second["hits"]
    ]  # the next 20, then the rest
    assert len({h["paper_id"] for h in every}) == 41
    assert [h["year"] for h in every] == [2026] * 40 + [2024]  # newest first
    last = client.get("/api/papers", params={"offset": 40}).json()
    assert last["year_papers"] == {"2024": 1} and first["year_papers"] == {"2026": 40}
    titled = [h["title"] for h in listing(client, sort="title")[:3]]
    assert titled == [THIRD["title"], TWIN["title"], OTHER["title"]]
    iclr = listing(client, venue="iclr")  # case ignored, as search's filter
    assert len(iclr) == 40 and {h["venue"] for h in iclr} == {"ICLR"}
    [tmlr] = listing(client, venue="TMLR", year=2024)
    assert tmlr["paper_id"] == ids["2312.07777"] and tmlr["author_keys"] == [
        "jose garcia", "grace hopper",
    ]  # fmt: skip
    assert client.get("/api/papers", params={"venue": "TMLR", "year": 2026}).json()["total"] == 0


def test_a_topics_papers_list_closest_to_its_centre_first(client, lake):
    settings, ids = lake
    topic = client.get(f"/api/paper/{ids['neon']}").json()["topic_id"]
    body = client.get("/api/papers", params={"topic": topic, "k": 100}).json()
    with open_lake(settings) as con:
        stored = con.execute(
            "select paper_id, round(1 - distance, 4) from paper_topics where topic_id = ? "
            "order by distance, paper_id",
            [topic],
        ).fetchall()
    assert body["sort"] == "centre"
    assert [(h["paper_id"], h["score"]) for h in body["hits"]] == stored
    bad = client.get("/api/papers", params={"sort": "size"})
    assert (bad.status_code, bad.json()) == (
        400, {"error": "sort must be one of year, title, centre, not 'size'"},
    )  # fmt: skip
    negative = client.get("/api/papers", params={"offset": -1})
    assert negative.json() == {"error": "offset must be 0 or more, not -1"}


def test_search_pages_through_its_best_matches(client):
    params = {"q": "learning", "k": 20}
    one, two = (client.get("/api/search", params=params | {"offset": o}).json() for o in (0, 20))
    both = client.get("/api/search", params=params | {"k": 40}).json()
    assert [h["paper_id"] for h in one["hits"] + two["hits"]] == [
        h["paper_id"] for h in both["hits"]
    ]
    assert one["total"] == 41 and [h["rank"] for h in two["hits"]] == list(range(21, 41))
    newest = client.get("/api/search", params=params | {"k": 41, "sort": "year"}).json()
    assert [h["year"] for h in newest["hits"]] == [2026] * 40 + [2024]
    assert client.get("/api/search", params=params | {"sort": "centre"}).status_code == 400


def test_author_page_lists_the_authors_papers_and_co_authors(client, lake):
    _, ids = lake
    grace = client.get("/api/author/grace hopper").json()
    assert {k: grace[k] for k in ("name", "spellings", "papers", "venues", "years")} == {
        "name": "Grace Hopper", "spellings": ["Grace Hopper"], "papers": 2,
        "venues": ["ICLR", "TMLR"], "years": [2024, 2026],
    }  # fmt: skip
    assert grace["co_authors"] == [
        {"author_key": "jose garcia", "name": "Jose GARCIA", "papers": 2}
    ]
    papers = listing(client, author="jose garcia")
    assert [(h["paper_id"], h["year"]) for h in papers] == [
        (ids["2501.04321"], 2026), (ids["2312.07777"], 2024),
    ]  # fmt: skip
    assert papers[0]["authors"] == ["Grace Hopper", "Jose  GARCIA"]
    assert papers[0]["author_keys"] == ["grace hopper", "jose garcia"]
    paper = client.get(f"/api/paper/{ids['2501.01234']}").json()
    assert paper["author_keys"] == ["ada lovelace", "alan turing"]
    missing = client.get("/api/author/nobody")
    assert (missing.status_code, missing.json()) == (
        404,
        {"error": "no author 'nobody' in version 2"},
    )


def test_venue_page_counts_are_venue_stats(client, lake):
    settings, _ = lake
    with open_lake(settings) as con:
        stats = con.execute(
            "select venue, year, papers, papers_with_code, topics from venue_stats"
        ).fetchall()
    for venue in ("ICLR", "TMLR"):
        body = client.get(f"/api/venue/{venue}").json()
        rows = [
            (venue, y["year"], y["papers"], y["papers_with_code"], y["topics"])
            for y in body["years"]
        ]
        assert sorted(rows) == sorted(r for r in stats if r[0] == venue)
        assert body["papers"] == sum(r[2] for r in rows) == sum(t["papers"] for t in body["topics"])
    assert client.get("/api/venue/TMLR").json()["years"][0]["year"] == 2024
    assert client.get("/api/venue/NeurIPS").status_code == 404


def test_map_colours_topics_venues_and_years_from_the_palette(client):
    body = read_map(client.get("/api/map").content)
    assert [(v["value"], v["papers"], v["colour"]) for v in body["venues"]] == [
        ("ICLR", 40, category_colour(0)), ("TMLR", 1, category_colour(1)),
    ]  # fmt: skip
    assert [(y["value"], y["papers"]) for y in body["years"]] == [(2024, 1), (2026, 40)]
    assert [y["colour"] for y in body["years"]] == sequential_colours(2)
    for topic in body["topics"]:
        assert topic["colour"] == topic_colour(topic["topic_id"])
    assert len({t["name"] for t in body["topics"]}) == len(body["topics"])
    assert sorted(body["points"]["venue"].tolist()) == [0] * 40 + [1]
    by_year = [body["years"][y]["value"] for y in body["points"]["year"]]
    assert sorted(by_year) == [2024] + [2026] * 40


def test_topics_that_would_read_alike_are_told_apart_by_a_term_of_their_own():
    topics = pl.DataFrame(
        {
            "topic_id": [0, 1, 2],
            "label": ["breast cancer, imputation, women", "breast cancer, imputation, missing",
                      "graphs, molecules"],
            "top_terms": [["breast", "women"], ["cancer", "simulation"], ["graphs"]],
        }
    )  # fmt: skip
    assert topic_names(topics) == {
        0: {"name": "breast cancer, women", "short": None},
        1: {"name": "breast cancer, missing", "short": None},
        2: {"name": "graphs, molecules", "short": "graphs"},
    }


def test_pages_and_assets_are_served_from_here(client):
    page = client.get("/paper/anything")
    assert page.status_code == 200 and 'data-default-version="2"' in page.text
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert sorted(assets) == ["/", "/static/explore/app.css", "/static/explore/app.js", "data:,"]
    assert client.get("/static/explore/app.css").status_code == 200
    modules = ["app.js"]  # the page's script and the modules it imports, all from here
    for name in modules:
        script = client.get(f"/static/explore/{name}")
        assert script.status_code == 200
        assert "http://" not in script.text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in script.text
        modules += [m for m in re.findall(r'from "\./([\w.]+)"', script.text) if m not in modules]
    assert sorted(modules) == [
        "app.js",
        "cards.js",
        "common.js",
        "labels.js",
        "map.js",
        "points.js",
    ]


@pytest.fixture(scope="module")
def server(lake):
    """`paperlake explore --port 0` in its own process: its URL, the process, its output."""
    settings, _ = lake
    with explorer_process(settings.warehouse) as started:
        yield started


def opened(chromium, base: str, path: str = ""):
    """The explorer's page at `path` (loaded, its map drawn), which may fetch nothing but
    from `base`, with the requests it tried elsewhere and its errors."""
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
    page.goto(base + path)
    page.wait_for_selector("#map[data-points]", state="attached")
    return page, outside, errors


SCREEN = "async (id) => (await import('/static/explore/map.js')).screenOf(id)"


def drawn(page, what: str) -> str:
    """What the map's canvas says it drew: points, shown, lit or focus."""
    return page.get_attribute("#map", f"data-{what}")


def lit(page, expected: int) -> str:
    """The number of papers the map marks once it has marked `expected` (the list's papers
    are found on the map by a request of their own, after the list is shown), or what it
    marks after 10 s."""
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(
            "n => document.querySelector('#map')?.dataset.lit === n", arg=str(expected),
            timeout=10_000,
        )  # fmt: skip
    return drawn(page, "lit")


def test_explorer_in_chromium_searches_opens_a_paper_and_maps_every_paper(chromium, server, lake):
    base, _ = server
    _, ids = lake
    page, outside, errors = opened(chromium, base)
    assert drawn(page, "points") == "41" and page.locator("#map-view circle").count() == 0
    assert page.locator("#labels text").count() == page.locator(".stats b").nth(1).evaluate(
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
    hits = page.locator("li.hit").count()
    assert lit(page, hits) == str(hits)

    page.locator(f'li.hit[data-paper="{ids["2501.01234"]}"] a[data-nav]').first.click()
    page.wait_for_selector("#nearest li.hit")
    assert page.url == f"{base}paper/{ids['2501.01234']}"
    assert page.inner_text("article h1") == TWIN["title"]
    assert page.locator("#nearest li.hit").count() == 10
    assert page.locator("#duplicates li.hit").get_attribute("data-paper") == ids["neon"]
    assert "extra.jsonl" in page.inner_text("#sources")
    assert drawn(page, "points") == "41"
    assert drawn(page, "focus") == ids["2501.01234"]

    page.go_back()  # the search again, from the address
    page.wait_for_selector("li.hit")
    assert page.input_value("#q") == "negative extrapolation self-training"

    page.select_option("#version", "1")  # version 1: 38 papers on the map
    page.wait_for_selector('#map[data-points="38"]')
    assert "v=1" in page.url
    page.wait_for_selector("li.hit")
    pid = page.locator("li.hit").last.get_attribute("data-paper")
    x, y = page.evaluate(SCREEN, pid)
    page.mouse.move(x, y)  # the tip names it, then a click opens it
    page.wait_for_selector("#tip:not([hidden])")
    page.mouse.click(x, y)
    page.wait_for_selector(f'article[data-paper="{pid}"]')
    assert page.url == f"{base}paper/{pid}?v=1"

    page.goto(f"{base}paper/deadbeef00000000")
    page.wait_for_selector("#error:not([hidden])")
    assert page.inner_text("#error") == "no paper deadbeef00000000 in version 2"
    errors = [e for e in errors if "404" not in e]  # the page's own 404 above
    page.close()
    assert outside == [] and errors == []


def shown_text(page, selector: str) -> str:
    return page.locator(selector).inner_text()


def test_browsing_by_venue_to_an_author_and_a_venue_in_chromium(chromium, server, lake):
    base, _ = server
    _, ids = lake
    page, outside, errors = opened(chromium, base)
    page.select_option("#venue", "ICLR")
    page.click("#search button[type=submit]")  # no words: the venue's papers
    page.wait_for_selector("li.hit")
    assert page.url == f"{base}?venue=ICLR"
    assert shown_text(page, ".list-head .shown") == "1–20 of 40 papers"
    assert page.locator("li.hit").count() == 20
    assert page.locator(".year-head").all_inner_texts() == ["2026 · 40 papers"]
    assert lit(page, 20) == "20"
    page.click(".pager a[rel=next]")
    page.wait_for_function("document.querySelector('.list-head .shown')?.textContent[0] === '2'")
    assert page.url == f"{base}?venue=ICLR&page=2"
    assert shown_text(page, ".list-head .shown") == "21–40 of 40 papers"
    page.select_option("#sort", "title")
    page.wait_for_selector(f'li.hit:first-of-type[data-paper="{ids["2501.01234"]}"]')
    assert page.url == f"{base}?venue=ICLR&sort=title"
    assert page.locator("li.hit .title").all_inner_texts()[:2] == [TWIN["title"], OTHER["title"]]

    other = page.locator(f'li.hit[data-paper="{ids["2501.04321"]}"]')
    other.locator("a.author", has_text="Grace Hopper").click()
    page.wait_for_selector("#author-head h1")
    assert page.url == f"{base}author/grace%20hopper"
    assert shown_text(page, "#author-head h1") == "Grace Hopper"
    assert shown_text(page, "#author-head .co-authors") == "With: Jose GARCIA (2)"
    assert [h.get_attribute("data-paper") for h in page.locator("li.hit").all()] == [
        ids["2501.04321"], ids["2312.07777"],
    ]  # fmt: skip
    assert page.locator(".year-head").all_inner_texts() == ["2026 · 1 paper", "2024 · 1 paper"]

    page.locator("#author-head .venues a", has_text="TMLR").click()
    page.wait_for_selector("#venue-head table.years")
    assert page.url == f"{base}venue/TMLR"
    rows = page.locator("#venue-head table.years tbody tr").all_inner_texts()
    assert [row.split() for row in rows] == [["2024", "1", "0", "1"]]
    assert page.locator("li.hit").get_attribute("data-paper") == ids["2312.07777"]
    page.go_back()
    page.wait_for_selector("#author-head h1")
    page.close()
    assert outside == [] and errors == []


def test_search_within_a_topic_keeps_the_topic_and_marks_the_words(chromium, server, lake):
    base, _ = server
    _, ids = lake
    topic = page_api(chromium, f"{base}api/paper/{ids['2501.01234']}")["topic_id"]
    page, outside, errors = opened(chromium, base, f"topic/{topic}")
    page.wait_for_selector("#topic-head form.within")
    page.fill("#topic-head input", "negative extrapolation")
    page.press("#topic-head input", "Enter")
    page.wait_for_selector("li.hit mark")
    assert page.url == f"{base}?topic={topic}&q=negative+extrapolation"
    assert page.input_value("#topic") == str(topic) and page.input_value("#q") == (
        "negative extrapolation"
    )
    chips = page.locator("li.hit a[href^='/topic/']").evaluate_all("a => a.map(x => x.href)")
    assert chips and set(chips) == {f"{base}topic/{topic}"}
    twin = page.locator(f'li.hit[data-paper="{ids["2501.01234"]}"]')
    assert twin.locator(".title mark").all_inner_texts() == ["Negative", "Extrapolation"]
    marks = page.locator("li.hit mark").all_inner_texts()
    assert {m.lower() for m in marks} <= {"negative", "extrapolation", "extrapolate"}
    page.close()
    assert outside == [] and errors == []


def page_api(chromium, url: str) -> dict:
    page = chromium.new_page()
    try:
        return json.loads(page.goto(url).text())
    finally:
        page.close()


LABELS = """() => {
    const panel = document.querySelector('#map').getBoundingClientRect();
    const boxes = [...document.querySelectorAll('#labels text')]
        .filter((t) => t.getAttribute('display') !== 'none')
        .map((t) => t.getBoundingClientRect());
    const inside = (b) => b.left >= panel.left && b.right <= panel.right
        && b.top >= panel.top && b.bottom <= panel.bottom;
    const meet = (a, b) => a.left < b.right && b.left < a.right
        && a.top < b.bottom && b.top < a.bottom;
    return {
        shown: boxes.length,
        outside: boxes.filter((b) => !inside(b)).length,
        overlaps: boxes.flatMap((a, i) => boxes.slice(i + 1).filter((b) => meet(a, b))).length,
    };
}"""


# The colour of the canvas's pixel at a paper's place.
PIXEL = """async (id) => {
    const [x, y] = await (await import('/static/explore/map.js')).screenOf(id);
    const canvas = document.querySelector('#map');
    const box = canvas.getBoundingClientRect();
    const scale = canvas.width / box.width;
    const at = (v, from) => Math.floor((v - from) * scale);
    const ctx = canvas.getContext('2d');
    const [r, g, b] = ctx.getImageData(at(x, box.left), at(y, box.top), 1, 1).data;
    return `rgb(${r}, ${g}, ${b})`;
}"""


def rgb(colour: str) -> str:
    r, g, b = bytes.fromhex(colour[1:])
    return f"rgb({r}, {g}, {b})"


def test_map_legend_toggles_topics_colours_by_venue_and_keeps_labels_apart(chromium, server, lake):
    base, _ = server
    _, ids = lake
    with urllib.request.urlopen(f"{base}api/map") as answer:
        topics = read_map(answer.read())["topics"]
    page, outside, errors = opened(chromium, base)
    swatches = page.locator("#legend .swatch").evaluate_all(
        "s => s.map((x) => getComputedStyle(x).backgroundColor)"
    )
    assert swatches == [rgb(topic_colour(t["topic_id"])) for t in topics]
    assert page.evaluate(LABELS) == {"shown": len(topics), "outside": 0, "overlaps": 0}

    largest = topics[0]["topic_id"]
    page.click(f'#legend button.entry[data-key="{largest}"]')
    assert drawn(page, "shown") == str(41 - topics[0]["papers"])
    assert page.locator(f'#labels text[data-topic="{largest}"]').get_attribute("display") == "none"
    assert page.get_attribute(f'#legend button[data-key="{largest}"]', "aria-pressed") == "false"
    page.click(f'#legend button.entry[data-key="{largest}"]')
    assert drawn(page, "shown") == "41"

    page.select_option("#colour-by", "venue")
    assert page.locator("#legend .entry .name").all_inner_texts() == ["ICLR", "TMLR"]
    page.click('#legend button.entry[data-key="0"]')  # ICLR off: the TMLR paper stays
    assert drawn(page, "shown") == "1"
    assert page.evaluate(PIXEL, ids["2312.07777"]) == rgb(category_colour(1))

    page.select_option("#colour-by", "topic")
    for button, times in (("#zoom-out", 4), ("#zoom-reset", 1), ("#zoom-in", 3)):
        for _ in range(times):
            page.click(button)
            placed = page.evaluate(LABELS)
            assert (placed["outside"], placed["overlaps"]) == (0, 0), (button, placed)
    page.set_viewport_size({"width": 700, "height": 600})
    page.wait_for_timeout(400)  # the map is drawn again once resizing stops
    assert page.evaluate(LABELS)["overlaps"] == 0
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
