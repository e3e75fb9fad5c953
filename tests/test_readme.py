"""The README's library example runs as written, and every command it lists exists."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from aios_ledger.shell.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_library_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block = re.search(r"## Library example\n\n```python\n(.*?)```", README, re.DOTALL)
    assert block is not None
    monkeypatch.chdir(tmp_path)
    exec(compile(block.group(1), "README.md", "exec"), {})
    assert os.path.exists(tmp_path / "aios-ledger.db")


def test_every_listed_command_exists() -> None:
    parser = build_parser()
    listed = re.findall(r"^\| `([a-z-]+)(?: ([a-z-]+))?", README, re.MULTILINE)
    assert len(listed) > 20
    for command, sub in listed:
        argv = [command, sub] if sub and sub.islower() and sub.isalpha() else [command]
        with pytest.raises(SystemExit) as exited:
            parser.parse_args([*argv, "--help"])
        assert exited.value.code == 0, argv
