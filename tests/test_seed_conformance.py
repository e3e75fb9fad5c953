"""The behavioural seed, run unchanged against this project with its two modules mapped.

The seed lives in `../shared/seeds/` beside the project (CI lays it out the same way). Its module
names are mapped onto `aios_ledger.shell` and `aios_ledger.core` by two one-line shims, and its
`ROOT/deploy/...` lookup onto this checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT.parent / "shared" / "seeds" / "initial_execution_projection_tests.py"


@pytest.mark.skipif(not SEED.exists(), reason="the shared seeds are not beside this checkout")
def test_projection_seed_passes_unchanged(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_initial_execution_projection_seed.py").write_bytes(
        SEED.read_bytes()
    )
    (tmp_path / "deploy").symlink_to(ROOT / "deploy")
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "aios_agent_task_initial_execution_projection.py").write_text(
        "from aios_ledger.shell import *  # noqa: F403\n"
    )
    (shims / "aios_online_agent_execution.py").write_text(
        "from aios_ledger.core import *  # noqa: F403\n"
    )
    env = {**os.environ, "PYTHONPATH": str(shims)}
    answer = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert answer.returncode == 0, answer.stdout[-4000:] + answer.stderr[-2000:]
    assert " passed" in answer.stdout and "failed" not in answer.stdout
