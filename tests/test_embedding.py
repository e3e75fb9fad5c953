"""The core as an embeddable contract: the program of docs/embedding.md imports only the public
API (`aios_ledger.core` and its subpackages'), runs, and type-checks under `mypy --strict`, as
does the README's library example."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from aios_ledger.shell import Database, TaskLedger, export_log

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "embedding.md"
PUBLIC = re.compile(r"^\s*(?:from|import) (aios_ledger[\w.]*)", re.MULTILINE)


def an_export(tmp_path: Path) -> Path:
    """A ledger's whole log, exported by the shell as `aios-ledger log export --all` does."""
    path = tmp_path / "ledger.db"
    with TaskLedger(path) as ledger:
        ledger.create_task({"goal": "g", "instructions": "i"}, idempotency_key="create-1")
        claim = ledger.claim(agent_id="agent-1", capabilities=[], lease_seconds=60)
        assert claim is not None
        ledger.heartbeat(claim["task_id"], lease_token=claim["lease_token"], lease_seconds=60)
    export = tmp_path / "export.jsonl"
    with Database(path) as db, export.open("w") as out:
        export_log(db, out, task_id=None)
    return export


def the_program(tmp_path: Path) -> Path:
    """The guide's one Python block, as a file."""
    block = re.search(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    assert block is not None
    program = tmp_path / "embed_core.py"
    program.write_text(block.group(1))
    return program


def test_the_program_imports_only_the_public_core(tmp_path: Path) -> None:
    """`aios_ledger.core` and its domain subpackages' public APIs, never a module of theirs, and
    the sealed tables that `verify_export_lines` checks an export's state against."""
    public = {"aios_ledger.core", "aios_ledger.core.sealed_tables"} | {
        f"aios_ledger.core.{path.parent.name}" for path in (ROOT / "core").glob("*/__init__.py")
    }
    imported = set(PUBLIC.findall(the_program(tmp_path).read_text()))
    assert imported == {
        "aios_ledger.core",
        "aios_ledger.core.log",
        "aios_ledger.core.sealed_tables",
    }
    assert imported <= public


def test_the_program_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(the_program(tmp_path)), str(an_export(tmp_path))],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "export: 3 events intact; tampered: {'CONTENT_CHANGED': 1}" in done.stdout


def test_the_program_and_the_readme_example_type_check_strictly(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Library example\n\n```python\n(.*?)```", readme, re.DOTALL)
    assert block is not None
    example = tmp_path / "readme_example.py"
    example.write_text(block.group(1))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(the_program(tmp_path)), str(example)],
        cwd=ROOT,
        env={**os.environ, "MYPYPATH": str(_typecheck_root())},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def _typecheck_root() -> Path:
    """`aios_ledger.core` and `.shell` as mypy finds them from source: the editable install
    maps them with an import hook, which mypy does not follow (the same tree as `make lint`)."""
    root = ROOT / ".typecheck"
    package = root / "aios_ledger"
    package.mkdir(parents=True, exist_ok=True)
    for part in ("core", "shell", "sql"):
        link = package / part
        if not link.exists():
            link.symlink_to(ROOT / part)
    return root
