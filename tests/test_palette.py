"""Colours (flows/core/palette.py): topics' never repeat and the first ones are far apart;
years run dark to light. The explorer draws the same colours: it takes them from its API
(tests/test_explorer.py reads its legend's swatches)."""

from __future__ import annotations

import itertools
import math

from flows.core.palette import (
    CATEGORICAL,
    NO_TOPIC_COLOUR,
    SEQUENTIAL,
    category_colour,
    sequential_colours,
    topic_colour,
)


def lab(colour: str) -> tuple[float, float, float]:
    """CIELAB (D65) of a #rrggbb colour."""
    linear = []
    for i in (1, 3, 5):
        c = int(colour[i : i + 2], 16) / 255
        linear.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    r, g, b = linear
    xyz = (
        (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047,
        0.2126729 * r + 0.7151522 * g + 0.0721750 * b,
        (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883,
    )
    fx, fy, fz = (
        t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29 for t in xyz
    )
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def test_topic_colours_do_not_repeat():
    colours = [topic_colour(t) for t in range(200)]
    assert len(set(colours)) == 200
    assert colours[:3] == ["#4e79a7", "#f28e2b", "#e15759"]
    assert colours[24:26] == ["hsl(60.2, 68%, 40%)", "hsl(197.7, 68%, 45%)"]
    assert topic_colour(None) == NO_TOPIC_COLOUR
    assert [category_colour(i) for i in range(30)] == colours[:30]


def test_categorical_colours_are_far_apart_and_from_the_no_topic_grey():
    """CIE76 distances: the 15 topics of the shared corpora's map at least 29 apart, any two
    of the 24 at least 20, and each at least 20 from the grey of papers with no topic."""
    places = [lab(c) for c in CATEGORICAL]
    apart = {
        (a, b): math.dist(places[a], places[b]) for a, b in itertools.combinations(range(24), 2)
    }
    assert min(d for (a, b), d in apart.items() if b < 15) > 29
    assert min(apart.values()) > 20
    assert min(math.dist(p, lab(NO_TOPIC_COLOUR)) for p in places) > 20


def test_sequential_colours_run_from_dark_to_light():
    assert sequential_colours(1) == ["#26828e"]
    three = sequential_colours(3)
    assert three == [SEQUENTIAL[0], "#26828e", SEQUENTIAL[-1]]
    lightness = [lab(c)[0] for c in sequential_colours(12)]
    assert lightness == sorted(lightness)
