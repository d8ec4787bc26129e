"""The explorer's map at scale: 100,000 papers drawn on one canvas, without an element a
paper, by the real `paperlake explore` on a real warehouse, in Chromium, offline."""

from __future__ import annotations

import shutil

import numpy as np
import polars as pl
import pytest
from fastapi.testclient import TestClient

from flows import publish
from flows.core.lake import open_lake
from flows.core.locks import run_lock
from flows.core.settings import Settings
from flows.serve.explorer import Explorer
from flows.serve.explorer_app import create_app
from tests.conftest import explorer_process, read_map

N = 100_000
TOPICS = 160
VENUES = 20
WORDS = (
    "graphs", "proteins", "robots", "language", "vision", "speech", "markets", "climate",
    "quantum", "privacy", "agents", "tables", "music", "medicine", "traffic", "crystals",
    "games", "law", "code", "maps",
)  # fmt: skip


def copies(frame: pl.DataFrame, n: int) -> pl.DataFrame:
    """`n` copies of the first row of `frame` (its columns and types, to be overwritten)."""
    return frame.head(1).select(pl.all().gather(np.zeros(n, dtype=np.int64)))


def grown(tables: dict[str, pl.DataFrame], rng: np.random.Generator) -> dict[str, pl.DataFrame]:
    """Papers, topics, places and topic of N papers in TOPICS topics (each a blob of papers
    around its own centre) and VENUES venues, on the columns of the sample's tables."""
    topic = rng.integers(0, TOPICS, N)
    centres = rng.uniform(-0.85, 0.85, (TOPICS, 2))
    xy = np.clip(centres[topic] + rng.normal(0, 0.05, (N, 2)), -1, 1).round(5)
    ids = [f"{i:016x}" for i in range(N)]
    papers = copies(tables["papers"], N).with_columns(
        paper_id=pl.Series(ids),
        title=pl.Series([f"Paper number {i}" for i in range(N)]),
        abstract=pl.lit("A short abstract of a generated paper."),
        venue=pl.Series([f"Venue {i % VENUES:02d}" for i in range(N)]),
        year=pl.Series(2010 + np.arange(N) % 16, dtype=tables["papers"]["year"].dtype),
    )
    sizes = np.bincount(topic, minlength=TOPICS)
    labels = [f"{WORDS[t % 20]} {WORDS[t // 20]}, {WORDS[(t * 7) % 20]} {t}" for t in range(TOPICS)]
    topics = copies(tables["topics"], TOPICS).with_columns(
        topic_id=pl.Series(range(TOPICS), dtype=tables["topics"]["topic_id"].dtype),
        label=pl.Series(labels),
        papers=pl.Series(sizes, dtype=tables["topics"]["papers"].dtype),
        top_terms=pl.Series([label.replace(",", "").split() for label in labels]),
    )
    schema = tables["paper_topics"].schema
    paper_topics = copies(tables["paper_topics"], N).with_columns(
        paper_id=pl.Series(ids), topic_id=pl.Series(topic, dtype=schema["topic_id"])
    )
    coordinates = pl.DataFrame({"paper_id": ids, "x": xy[:, 0], "y": xy[:, 1]})
    return {
        "papers": papers,
        "topics": topics,
        "paper_topics": paper_topics,
        "paper_coordinates": coordinates.cast(dict(tables["paper_coordinates"].schema)),
    }


@pytest.fixture(scope="module")
def large(sample_run, tmp_path_factory) -> Settings:
    """A copy of the sample warehouse and its version 2, published as a run publishes
    (flows/publish), whose papers, topics, places and papers' topics are N generated
    papers in TOPICS topics; its other tables are version 1's."""
    warehouse = tmp_path_factory.mktemp("map-large") / "warehouse"
    shutil.copytree(sample_run.settings.warehouse, warehouse)
    settings = Settings(warehouse=warehouse)
    names = (*publish.TABLE_KEYS, *publish.HISTORY_TABLES)
    with open_lake(settings) as con:
        tables = {name: con.table(name).pl() for name in names}
    dim = len(tables["embeddings"]["embedding"][0])
    tables |= grown(tables, np.random.default_rng(0))
    tables["dq_results"] = tables["dq_results"].clear()
    with run_lock(settings):
        publish.publish_tables(tables, settings, f"{N} generated papers", {}, dim)
    return settings


def test_the_map_answers_its_columns_in_binary_and_names_a_paper_by_its_index(large):
    explorer = Explorer(large)
    try:
        with TestClient(create_app(explorer)) as client:
            answer = client.get("/api/map")
            named = client.get("/api/map/paper/12345").json()
            beyond = client.get(f"/api/map/paper/{N}")
            asked = f"{4242:016x},ffffffffffffffff,{N - 1:016x}"
            indexes = client.get("/api/map/indexes", params={"ids": asked}).json()
    finally:
        explorer.close()
    assert answer.headers["content-type"] == "application/octet-stream"
    assert len(answer.content) < 15 * N  # x and y in 4 bytes each, the rest in 2
    body = read_map(answer.content)
    points = body["points"]
    assert body["papers"] == N and body["version"] == 2
    assert list(points) == ["x", "y", "topic", "venue", "year"]
    assert [str(points[c].dtype) for c in points] == ["float32"] * 2 + ["int16"] * 3
    assert [v["value"] for v in body["venues"]] == [f"Venue {i:02d}" for i in range(VENUES)]
    assert len(body["topics"]) == TOPICS
    with open_lake(large) as con:
        tables = {t: con.table(t).pl() for t in ("papers", "paper_coordinates", "paper_topics")}
    query = (
        tables["paper_coordinates"]
        .join(tables["papers"].select("paper_id", "venue", "year"), on="paper_id")
        .join(tables["paper_topics"].select("paper_id", "topic_id"), on="paper_id", how="left")
        .sort("paper_id")
    )
    assert query["paper_id"].to_list() == [f"{i:016x}" for i in range(N)]  # index i: paper i
    for name in ("x", "y"):
        assert np.array_equal(points[name], query[name].to_numpy().astype(np.float32))
    for name, key, column in (("topic", "topic_id", "topic_id"), ("venue", "value", "venue"),
                              ("year", "value", "year")):  # fmt: skip
        assert points[name].min() >= 0  # every generated paper has one
        values = np.array([entry[key] for entry in body[name + "s"]])
        assert (values[points[name]] == query[column].to_numpy()).all(), name
    assert named == {
        "index": 12345, "paper_id": f"{12345:016x}", "title": "Paper number 12345",
        "untitled": False,
    }  # fmt: skip
    assert beyond.status_code == 404
    assert beyond.json()["error"] == f"no paper at index {N} of the map of version 2"
    assert indexes == {"version": 2, "indexes": {f"{4242:016x}": 4242, f"{N - 1:016x}": N - 1}}


@pytest.fixture(scope="module")
def server(large):
    with explorer_process(large.warehouse) as (base, _):
        yield base


# What the page holds: elements in the map's panel and of kinds that could draw a paper,
# and the canvas's pixels that are not its background.
PAGE = """() => {
    const canvas = document.querySelector('#map');
    const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let inked = 0;
    for (let p = 0; p < pixels.length; p += 4) {
        if (pixels[p] !== 251 || pixels[p + 1] !== 251 || pixels[p + 2] !== 253) inked++;
    }
    return {
        canvas: canvas.tagName, elements: document.querySelectorAll('.map-view *').length,
        marks: document.querySelectorAll('circle, rect, path, use').length, inked,
    };
}"""
LABELS = """() => [...document.querySelectorAll('#labels text')]
    .filter((t) => t.getAttribute('display') !== 'none')
    .map((t) => [t.dataset.topic, t.getBoundingClientRect()])
    .map(([topic, b]) => [topic, b.left, b.top, b.right, b.bottom])"""
SCREEN = "async (id) => (await import('/static/explore/map.js')).screenOf(id)"


def overlapping(labels: list[list]) -> int:
    boxes = [label[1:] for label in labels]
    return sum(
        a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
    )


def test_chromium_draws_every_paper_on_one_canvas_with_labels_apart(chromium, server):
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    outside: list[str] = []
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.route(
        "**/*",
        lambda r: r.continue_() if r.request.url.startswith(server) else (
            outside.append(r.request.url), r.abort()
        ),
    )  # fmt: skip
    page.goto(server)
    page.wait_for_selector(f'#map[data-points="{N}"]', state="attached", timeout=60_000)
    drawn = page.evaluate(PAGE)
    assert drawn["canvas"] == "CANVAS" and drawn["marks"] == 0
    assert drawn["elements"] <= 3 + TOPICS  # canvas, svg, g and at most a label a topic
    assert drawn["inked"] > 20_000  # dots of papers, not an empty panel
    assert page.get_attribute("#map", "data-shown") == str(N)
    labels = page.evaluate(LABELS)
    assert 0 < len(labels) < TOPICS and overlapping(labels) == 0

    for _ in range(3):
        page.click("#zoom-in")
    closer = page.evaluate(LABELS)
    named = {label[0] for label in closer} - {label[0] for label in labels}
    assert named and overlapping(closer) == 0  # topics unnamed before are named closer up

    page.click("#zoom-reset")
    x, y = page.evaluate(SCREEN, f"{4242:016x}")
    page.mouse.move(x, y)
    page.wait_for_function("document.querySelector('#tip').textContent.startsWith('Paper')")
    tip = page.inner_text("#tip")
    assert tip.startswith("Paper number ") and "Venue" in tip
    page.mouse.click(x, y)  # opens the paper the tip names, and rings it on the map
    page.wait_for_selector("article h1")
    number = int(page.inner_text("article h1").removeprefix("Paper number "))
    assert tip.splitlines()[0] == f"Paper number {number}"
    assert page.url == f"{server}paper/{number:016x}"
    page.wait_for_selector(f'#map[data-focus="{number:016x}"]', state="attached")
    page.go_back()
    page.wait_for_selector('#map[data-focus=""]', state="attached")

    largest = page.locator("#legend button.entry").first
    size = int(largest.locator(".count").inner_text())
    largest.click()  # its papers hidden
    assert page.get_attribute("#map", "data-shown") == str(N - size)
    page.close()
    assert outside == [] and errors == []
