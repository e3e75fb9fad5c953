"""`python -m bench.paint_phases`: the first paint's phases, profiled in the system Chromium,
each console page reached from the console's own site and from another."""

from __future__ import annotations

from pathlib import Path

from console_support import require_browser

from bench.paint_phases import COLUMNS, profile


def test_every_page_is_profiled_both_ways_with_its_stylesheet_from_the_cache(
    tmp_path: Path,
) -> None:
    require_browser()
    rows = profile(tasks=200, reps=1, scratch=tmp_path)
    assert sorted((way, page) for way, page, _ in rows) == [
        (way, page)
        for way in ("from data:", "same site")
        for page in ("/tasks", "/tasks/{id}", "one-line page")
    ]
    for _, page, found in rows:
        # The phases in the order cause and effect give them: the last byte before the end of
        # parsing, the paint after the first byte. The first paint may come before the parser
        # is done (the browser paints what it has), so those two are in no fixed order.
        assert found["first_byte"] <= found["last_byte"] <= found["parsed"]
        assert found["first_byte"] <= found["paint"]
        if page == "one-line page":
            assert "stylesheet" not in found
        else:
            assert set(found) == set(COLUMNS)
            # at its digest address the stylesheet is immutable: no request after the first
            assert found["stylesheet_bytes"] == 0
