"""Run the code blocks of a Markdown file that are marked `<!-- ci: run -->`, as a reader would.

The marker stands on a line of its own; it applies to the next fenced block after it (a heading
may stand between them). A `sh` block runs under `bash -euo pipefail`, a `python` block under
the project's interpreter; either fails on a non-zero exit. Each block gets a fresh temporary
folder as its current directory, holding a copy of the repository's `examples/`: the README's
blocks are pasted from the repository root, and that is all of the root they use, so a run
changes nothing in the tree. `.venv/bin` comes first on `PATH` (as the README tells a reader to
set it) and no `AIOS_*` variable of the caller's leaks in.

    python -m tests.readme_snippets README.md docs/library.md
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- ci: run -->"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
RUNNERS = {"sh": ["bash", "-euo", "pipefail"], "python": [sys.executable]}


@dataclass(frozen=True)
class Snippet:
    source: str
    line: int
    language: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.source}:{self.line}"


def marked_snippets(path: Path) -> list[Snippet]:
    """Every block that follows a marker, in order; a marker with no block after it, or before a
    block of a language this runner cannot run, is an error rather than a skipped check."""
    text = path.read_text()
    found = []
    for marker in re.finditer(re.escape(MARKER), text):
        fence = FENCE.search(text, marker.end())
        if fence is None:
            raise ValueError(f"{path}: the marker at offset {marker.start()} has no block after it")
        language = fence.group(1)
        if language not in RUNNERS:
            raise ValueError(f"{path}: a marked {language!r} block; runnable: {sorted(RUNNERS)}")
        line = text.count("\n", 0, fence.start()) + 1
        found.append(Snippet(display_name(path), line, language, fence.group(2)))
    return found


def display_name(path: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def run_snippet(snippet: Snippet, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run one block in a fresh folder; the completed process, whatever its exit status."""
    with tempfile.TemporaryDirectory(prefix="aios-readme-") as folder:
        shutil.copytree(ROOT / "examples", Path(folder) / "examples")
        script = Path(folder) / ("snippet.py" if snippet.language == "python" else "snippet.sh")
        script.write_text(snippet.code)
        return subprocess.run(
            [*RUNNERS[snippet.language], str(script)],
            cwd=folder,
            env=reader_environment(folder),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def reader_environment(folder: str) -> dict[str, str]:
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("AIOS_")}
    path = os.pathsep.join([str(ROOT / ".venv" / "bin"), inherited.get("PATH", os.defpath)])
    # TMPDIR inside the folder: the blocks' `mktemp -d` folders go when the run is over.
    return {**inherited, "PATH": path, "TMPDIR": folder}


def main(argv: Sequence[str] | None = None) -> int:
    files = [Path(name) for name in (argv if argv is not None else sys.argv[1:])]
    if not files:
        print("usage: python -m tests.readme_snippets FILE.md ...", file=sys.stderr)
        return 2
    failed = 0
    for snippet in (snippet for path in files for snippet in marked_snippets(path)):
        done = run_snippet(snippet)
        print(f"{'ok' if done.returncode == 0 else 'FAILED'}: {snippet.name} ({snippet.language})")
        if done.returncode != 0:
            failed += 1
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
