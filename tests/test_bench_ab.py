"""`bench.ab` measures two builds through the public API only: its worker must keep running on
the current build, or the next side-by-side comparison has nothing to compare."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.ab_worker import FIGURES


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_each_figure_runs_on_the_current_build(name: str, tmp_path: Path) -> None:
    assert FIGURES[name](3, tmp_path / f"{name}.db") > 0
