"""Topic colours, the same on every page: the report's map here, the explorer's in
flows/static/explore/app.js (`topicColour`, whose output tests/test_palette.py compares
with this one's in Chromium).

Hues a golden angle apart never repeat, however many topics there are, and neighbouring
topic ids land far apart on the colour wheel; lightness steps through five levels so that
two hues that do come close still differ in shade.
"""

from __future__ import annotations

GOLDEN_ANGLE = 137.50776405  # degrees: 360 * (1 - 1 / golden ratio)
LIGHTNESS = (45, 58, 36, 52, 40)  # percent, taken in turn by topic id
SATURATION = 68  # percent
NO_TOPIC_COLOUR = "#9aa1ad"  # papers with no topic


def topic_colour(topic_id: int | None) -> str:
    """The CSS colour of a topic (`hsl(...)`), or NO_TOPIC_COLOUR for no topic."""
    if topic_id is None:
        return NO_TOPIC_COLOUR
    hue = (topic_id * GOLDEN_ANGLE) % 360
    light = LIGHTNESS[topic_id % len(LIGHTNESS)]
    return f"hsl({hue:.1f}, {SATURATION}%, {light}%)"
