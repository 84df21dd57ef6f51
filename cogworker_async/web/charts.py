"""A chart's numbers computed on the server: pure geometry, no JavaScript library.

The pages draw their charts with uPlot (static/vendor/) from a ``data-series``
attribute; ``line_chart`` still gives the Metrics page its heading (the span's
first and last labels, the top value), and ``points`` a polyline for anyone
drawing SVG without a script.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 600
HEIGHT = 160
PAD = 4


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    css: str
    points: str
    last: int


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    top: int
    """The largest value drawn (the y axis's label)."""
    series: list[Series]
    labels: list[str]


def points(values: Sequence[int], top: int, *, width: int = WIDTH, height: int = HEIGHT) -> str:
    """The ``points`` attribute of a polyline through ``values`` scaled to ``top``."""
    if not values:
        return ""
    step = (width - 2 * PAD) / max(1, len(values) - 1)
    scale = (height - 2 * PAD) / max(1, top)
    return " ".join(
        f"{PAD + i * step:.1f},{height - PAD - max(0, v) * scale:.1f}" for i, v in enumerate(values)
    )


def line_chart(named: Sequence[tuple[str, str, Sequence[int]]], labels: Sequence[str]) -> Chart:
    """One chart of several series sharing a y scale: (name, css class, values) each."""
    top = max((max(values, default=0) for _, _, values in named), default=0)
    top = max(top, 1)
    return Chart(
        WIDTH,
        HEIGHT,
        top,
        [
            Series(name, css, points(values, top), values[-1] if values else 0)
            for name, css, values in named
        ],
        list(labels),
    )
