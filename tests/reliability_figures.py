"""Figures of the reliability tests (operations, kills, anomalies) for RELIABILITY.md.

When `AIOS_RELIABILITY_FIGURES` names a file (`make soak` sets it), each test appends one JSON
line with its figures; otherwise the figures are only shown with `pytest -s`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

FIGURES_ENV = "AIOS_RELIABILITY_FIGURES"


def record_figures(test: str, figures: dict[str, Any]) -> None:
    line = json.dumps({"test": test, "soak": os.environ.get("AIOS_SOAK") == "1", **figures})
    sys.stdout.write(line + "\n")
    target = os.environ.get(FIGURES_ENV)
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
