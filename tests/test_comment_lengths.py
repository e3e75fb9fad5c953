"""Comments in core/ and shell/ say why in a few sentences; history and figures go to the docs.

A module docstring longer than `MAX_MODULE_DOCSTRING_LINES` narrates instead of explaining, and a
measurement in a comment (a latency, a percentage, "N times faster") is stale the day the code or
the machine changes: CHANGELOG.md and docs/ are where figures live.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("core", "shell")
MAX_MODULE_DOCSTRING_LINES = 15

# A number with a unit of time finer than a second, a percentage, or a speed-up factor. Limits
# are written in other units ("at most 64 KiB", "30 seconds") and so are not flagged.
MEASUREMENT = re.compile(
    r"\b\d+(?:\.\d+)?\s*(?:ms|µs|us|ns)\b"
    r"|\b\d+(?:\.\d+)?\s*%"
    r"|\b\d+(?:\.\d+)?\s*(?:times|x|\u00d7)\s+(?:faster|slower|quicker|more|fewer|less)\b",
    re.IGNORECASE,
)


# Numbers that are rules, not measurements: (module, the text the pattern matches).
RULES = {
    ("core/tasks/backoff.py", "25 %"),  # the retry jitter: up to a quarter of the delay
}


def _modules() -> list[Path]:
    return sorted(path for folder in FOLDERS for path in (ROOT / folder).rglob("*.py"))


def _comments_and_docstrings(source: str) -> Iterator[tuple[int, str]]:
    """Every comment and docstring of a module, with the line it starts on."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                yield node.body[0].lineno, docstring


def test_module_docstrings_are_short() -> None:
    long = {}
    for path in _modules():
        docstring = ast.get_docstring(ast.parse(path.read_text()), clean=False)
        if docstring is not None and len(docstring.splitlines()) > MAX_MODULE_DOCSTRING_LINES:
            long[str(path.relative_to(ROOT))] = len(docstring.splitlines())
    assert long == {}, f"module docstrings over {MAX_MODULE_DOCSTRING_LINES} lines: {long}"


def test_comments_hold_no_measurements() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {match.group(0)!r}"
        for path in _modules()
        for line, text in _comments_and_docstrings(path.read_text())
        for match in MEASUREMENT.finditer(text)
        if (str(path.relative_to(ROOT)), match.group(0)) not in RULES
    ]
    assert found == []


@pytest.mark.parametrize(
    "text",
    ["took 40 ms", "about 10% more", "3 times faster", "1.5x faster", "waits 250µs"],
)
def test_the_measurement_pattern_flags_figures(text: str) -> None:
    assert MEASUREMENT.search(text)


@pytest.mark.parametrize(
    "text",
    ["at most 64 KiB", "every 30 seconds", "`%(name)s`", "over 256 MiB", "up to 63 lines"],
)
def test_the_measurement_pattern_leaves_limits_alone(text: str) -> None:
    assert not MEASUREMENT.search(text)
