"""Colours, the same on every page: the report's map and the explorer's (which takes them
from its API, flows/serve/explorer_map.py, so that no page keeps a copy).

Topics (and the explorer's venues) take CATEGORICAL in turn: Tableau 10, less its grey
(papers with no topic are grey) and its pink (close to its red), then colours chosen by
Glasbey's method (each the sRGB colour farthest, by CIEDE2000, from every colour before it,
with lightness 30 to 78 and chroma over 30, so none is pale on white). No two of them are
closer than CIEDE2000 17; a topic past them takes a hue a golden angle from the one before,
which never repeats. Years take SEQUENTIAL (viridis, less its palest yellow): old is dark,
new is light.
"""

from __future__ import annotations

CATEGORICAL = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f",
    "#7800a7", "#485000", "#783040", "#007060", "#703808", "#d708ff", "#8f8000", "#00b7ff",
    "#f7af9f", "#cf0080", "#ff97ff", "#10409f", "#9fcf10", "#b70010", "#705887", "#9780ff",
)  # fmt: skip
# viridis at 0, 1/9, ..., 8/9 (its last tenth, a yellow too pale for dots on white, left out)
SEQUENTIAL = (
    "#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58",
    "#b5de2b",
)  # fmt: skip
GOLDEN_ANGLE = 137.50776405  # degrees: 360 * (1 - 1 / golden ratio)
LIGHTNESS = (45, 58, 36, 52, 40)  # percent, taken in turn past CATEGORICAL
SATURATION = 68  # percent
NO_TOPIC_COLOUR = "#9aa1ad"  # papers with no topic (and the explorer's other venues)


def topic_colour(topic_id: int | None) -> str:
    """The CSS colour of a topic, or NO_TOPIC_COLOUR for no topic."""
    if topic_id is None:
        return NO_TOPIC_COLOUR
    return category_colour(topic_id)


def category_colour(index: int) -> str:
    """The CSS colour of the index-th of a set of categories: CATEGORICAL, then golden-angle
    hues (`hsl(...)`) that never repeat."""
    if index < len(CATEGORICAL):
        return CATEGORICAL[index]
    hue = (index * GOLDEN_ANGLE) % 360
    light = LIGHTNESS[index % len(LIGHTNESS)]
    return f"hsl({hue:.1f}, {SATURATION}%, {light}%)"


def sequential_colours(n: int) -> list[str]:
    """n colours from dark to light along SEQUENTIAL (its ends included), for ordered values
    such as years; one value takes the middle."""
    if n == 1:
        return [mix(0.5)]
    return [mix(i / (n - 1)) for i in range(n)]


def mix(at: float) -> str:
    """The colour at `at` (0 to 1) along SEQUENTIAL, mixed linearly in sRGB."""
    place = at * (len(SEQUENTIAL) - 1)
    low = min(int(place), len(SEQUENTIAL) - 2)
    share = place - low
    a, b = (bytes.fromhex(SEQUENTIAL[i][1:]) for i in (low, low + 1))
    return "#" + "".join(f"{round(x + (y - x) * share):02x}" for x, y in zip(a, b, strict=True))
