"""Bar charts for the console: each bar's geometry in a fixed view box, which a template writes
out as inline SVG, so that the page needs no chart library or script."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

WIDTH = 640
HEIGHT = 200
# Room on the left for the axis's figures and below for the first and last labels.
LEFT = 40
BOTTOM = 20
TOP = 10
GAP = 2


@attrs.frozen
class Bar:
    label: str
    value: int
    x: float
    y: float
    width: float
    height: float


@attrs.frozen
class Chart:
    title: str
    unit: str
    bars: tuple[Bar, ...]
    top: int
    # Whether the bars add up to something (counts per hour do; a depth at each hour does not).
    summed: bool = True
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    base: int = HEIGHT - BOTTOM

    @property
    def total(self) -> int:
        return sum(bar.value for bar in self.bars)

    @property
    def summary(self) -> str:
        """The chart in words (the SVG's accessible name)."""
        if not self.bars:
            return f"{self.title}: no data"
        peak = max(self.bars, key=lambda bar: bar.value)
        return (
            f"{self.title}: {len(self.bars)} bars from {self.bars[0].label} to "
            f"{self.bars[-1].label}, highest {peak.value} {self.unit} at {peak.label}"
        )


def _nice_top(peak: int) -> int:
    """The scale's top: the peak rounded up to 1, 2 or 5 times a power of ten (at least 1)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if peak <= step * factor:
                return step * factor
        step *= 10


def bar_chart(
    title: str, unit: str, points: Sequence[tuple[str, int]], *, summed: bool = True
) -> Chart:
    """A chart of `points` (label, value >= 0), one bar each, left to right."""
    top = _nice_top(max((value for _, value in points), default=0))
    plot_width = WIDTH - LEFT
    plot_height = HEIGHT - BOTTOM - TOP
    slot = plot_width / max(1, len(points))
    bars = []
    for index, (label, value) in enumerate(points):
        height = plot_height * max(0, value) / top
        bars.append(
            Bar(
                label=label,
                value=value,
                x=round(LEFT + index * slot + GAP / 2, 2),
                y=round(HEIGHT - BOTTOM - height, 2),
                width=round(max(1.0, slot - GAP), 2),
                height=round(height, 2),
            )
        )
    return Chart(title=title, unit=unit, bars=tuple(bars), top=top, summed=summed)
