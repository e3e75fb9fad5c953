"""stub"""

from pathlib import Path
from typing import Any


def run(scratch: Path, *, quick: bool, reps: int) -> list[dict[str, Any]]:
    return []
