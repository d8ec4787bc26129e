"""Topic colours: the report's (flows/core/palette.py) are the explorer's (app.js), and distinct."""

from __future__ import annotations

import re
from pathlib import Path

from flows.core.palette import NO_TOPIC_COLOUR, topic_colour

APP_JS = Path(__file__).resolve().parents[1] / "flows" / "static" / "explore" / "app.js"


def test_topic_colours_do_not_repeat():
    colours = [topic_colour(t) for t in range(200)]
    assert len(set(colours)) == 200
    assert colours[:3] == ["hsl(0.0, 68%, 45%)", "hsl(137.5, 68%, 58%)", "hsl(275.0, 68%, 36%)"]
    assert topic_colour(None) == NO_TOPIC_COLOUR


def test_topic_colours_are_the_explorers(chromium):
    """The explorer's topicColour, run in Chromium, gives the same colour for every topic."""
    source = APP_JS.read_text(encoding="utf-8")
    constant = re.search(r"^const GOLDEN_ANGLE = [^;]+;$", source, re.M).group(0)
    function = re.search(r"^function topicColour\(.*?^\}$", source, re.M | re.S).group(0)
    page = chromium.new_page()
    try:
        shown = page.evaluate(
            f"() => {{ {constant}\n{function}\n"
            "return [null, ...Array.from({length: 60}, (_, i) => i)].map(topicColour); }"
        )
    finally:
        page.close()
    assert shown == [topic_colour(None)] + [topic_colour(t) for t in range(60)]
