"""The explorer's map at scale: start `paperlake explore` on a warehouse, time /api/map over
HTTP (seconds and bytes, first and warm) and the naming of a paper by its index on the map
(what the tip asks), then open the page in headless Chromium (the system's, offline) and
time it until the map says it drew every paper; print the server's peak RSS. `--shot FILE`
saves a screenshot of the page.

    .venv/bin/python bench/explore_map.py --warehouse /tmp/map100k/warehouse
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import time
import urllib.request
from pathlib import Path

from explorer_process import explorer

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"]
# The map is drawn once its element says how many papers it holds (data-points).
DRAWN = "n => document.querySelector('#map')?.dataset.points === String(n)"


def fetch(url: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    with urllib.request.urlopen(url) as response:
        body = response.read()
    return time.perf_counter() - started, body


def papers_of(body: bytes) -> int:
    """How many papers /api/map holds, from its head (JSON, after its length in 4 bytes)."""
    (size,) = struct.unpack_from("<I", body)
    return json.loads(body[4 : 4 + size])["papers"]


def page_seconds(base: str, papers: int, shot: Path | None) -> tuple[float, int]:
    """Seconds from navigation to a drawn map (and a frame painted), and the number of
    elements in the map panel."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(base) else r.abort())
        started = time.perf_counter()
        page.goto(base)
        page.wait_for_function(DRAWN, arg=papers, timeout=180_000, polling=50)
        page.evaluate("() => new Promise((done) => requestAnimationFrame(() => done()))")
        seconds = time.perf_counter() - started
        elements = page.evaluate("() => document.querySelectorAll('.map-panel *').length")
        if shot:
            page.screenshot(path=str(shot))
        browser.close()
    return seconds, elements


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", "-w", required=True)
    parser.add_argument("--shot", type=Path, help="save a screenshot of the page here")
    args = parser.parse_args()
    with explorer(args.warehouse) as (base, server):
        first, body = fetch(base + "api/map")
        warm, _ = fetch(base + "api/map")
        papers = papers_of(body)
        named, _ = fetch(f"{base}api/map/paper/{papers // 2}")
        loaded, elements = page_seconds(base, papers, args.shot)
        peak = Path(f"/proc/{server.pid}/status").read_text()
        rss = int(re.search(r"VmHWM:\s+(\d+) kB", peak).group(1)) / 1024
    print(f"/api/map at {papers:,} papers: {len(body):,} bytes, first {first:.2f} s, "
          f"warm {warm:.2f} s; a paper named by its index in {1000 * named:.0f} ms")  # fmt: skip
    print(f"page in headless Chromium: map drawn in {loaded:.2f} s, {elements} elements")
    print(f"explorer peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
