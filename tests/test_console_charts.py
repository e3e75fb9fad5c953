"""The Health page's pure parts: the bar chart's geometry and scale, the hours it covers, and
the queue's depth worked back from its depth now."""

from __future__ import annotations

from datetime import UTC, datetime

from aios_ledger.shell.web.charts import HEIGHT, WIDTH, bar_chart
from aios_ledger.shell.web.pages.health import hours_until, queue_depths


def test_bars_fill_the_plot_in_order_and_scale_to_a_round_top() -> None:
    chart = bar_chart("t", "tasks", [("a", 0), ("b", 7), ("c", 3)])
    assert chart.top == 10 and chart.total == 10
    a, b, c = chart.bars
    assert a.height == 0 and a.x < b.x < c.x and c.x + c.width <= WIDTH
    assert b.height > c.height > 0 and b.y + b.height == c.y + c.height == chart.base
    assert b.y >= 0 and chart.base < HEIGHT
    assert chart.summary == "t: 3 bars from a to c, highest 7 tasks at b"


def test_an_empty_chart_says_so() -> None:
    chart = bar_chart("t", "tasks", [])
    assert chart.bars == () and chart.top == 1 and chart.summary == "t: no data"


def test_the_hours_end_at_nows_and_cross_midnight() -> None:
    hours = hours_until(datetime(2026, 12, 1, 1, 30, tzinfo=UTC))
    assert len(hours) == 24 and hours[-1] == "2026-12-01T01" and hours[0] == "2026-11-30T02"


def test_the_depth_is_worked_back_from_now() -> None:
    # 5 queued now; the last hour 3 came in and 1 was claimed: 3 at the end of the hour before.
    assert queue_depths(5, [9, 2, 3], [0, 4, 1]) == [5, 3, 5]
    assert queue_depths(0, [0, 9], [0, 0]) == [0, 0]  # never below 0
