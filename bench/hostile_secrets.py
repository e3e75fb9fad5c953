"""`python -m bench.hostile_secrets`: what a bundle bomb costs the ledger before its refusal.

The bomb is the hostile-agent suite's (`tests/test_hostile_agent_secrets.py`): one 4 MiB blob
under 10,000 paths, a bundle of a few hundred KB. Recorded as a proposal through the library
(`record_proposal`, what `POST /v1/tasks/{id}/proposal` runs), on a real SQLite ledger and a
real bare repository in a scratch folder: once under the default scan budget (refused
`SCAN_BUDGET_EXCEEDED`), once with byte budgets that admit it (the repository's settings in
the ledger: per proposal and per agent), so that the scan reads the blob (once: by object id)
and the seconds budget is what bounds it, and once from an agent whose scan budget for the
window is spent (a clean proposal recorded, then the repository's agent budget lowered below
what it spent: refused `AGENT_SCAN_BUDGET_EXCEEDED` before the bundle is read). Prints one
JSON line per case: the bundle's bytes, what the upload answered and the seconds it took.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests"
BOMB_PATHS = 10_000
BOMB_BLOB = 4 * 1024 * 1024


def _case(name: str, record: Any) -> dict[str, Any]:
    from aios_ledger.core import LedgerError

    start = time.perf_counter()
    try:
        record()
        answer = "RECORDED"
    except LedgerError as refused:
        answer = refused.code
    return {"case": name, "answer": answer, "seconds": round(time.perf_counter() - start, 3)}


def main() -> int:
    sys.path.insert(0, str(TESTS))
    from aios_ledger.shell.db.connection import Database
    from aios_ledger.shell.git.proposals import record_proposal
    from aios_ledger.shell.git.repos import change_repository_settings
    from git_support import (
        REPOSITORY,
        binding,
        claim,
        edit,
        governed_task,
        make_repository,
        propose,
        register,
        workspace,
    )
    from hostile_support import bundle_bomb

    def settings(db_path: Path, key: str, **changes: int) -> None:
        with Database(db_path) as db:
            change_repository_settings(db, REPOSITORY, changes, idempotency_key=key)

    def spend_the_window(db_path: Path, base: str) -> None:
        """A clean proposal of the agent's, then its window's byte budget below its spend."""
        governed_task(db_path, "task-clean", binding("task-clean", base))
        claimed = claim(db_path, "task-clean")
        space = workspace(db_path, claimed)
        try:
            edit(space, {"notes.txt": "nothing secret\n" * 64})
            assert propose(db_path, space, claimed) is not None
        finally:
            space.remove()
        settings(db_path, "spent", agent_scan_max_bytes=1)

    with tempfile.TemporaryDirectory(prefix="aios-bench-hostile-") as folder:
        root = Path(folder)
        db_path = root / "ledger.db"
        bare, base = make_repository(root)
        register(db_path, bare)

        def nothing() -> None:
            return None

        def admit_the_bytes() -> None:
            settings(db_path, "admit", scan_max_bytes=1 << 40, agent_scan_max_bytes=1 << 40)

        def spend() -> None:
            spend_the_window(db_path, base)

        cases = []
        preparations: tuple[tuple[str, Callable[[], None]], ...] = (
            ("bomb, default budget", nothing),
            ("bomb, budget admits its bytes", admit_the_bytes),
            ("bomb, agent over its window", spend),
        )
        for name, prepare in preparations:
            prepare()
            task_id = "task-" + name.split(",")[1].strip().replace(" ", "-")
            governed_task(db_path, task_id, binding(task_id, base))
            claimed = claim(db_path, task_id)
            space = workspace(db_path, claimed)
            try:
                git_dir, out = Path(space.path, ".git"), Path(space.root, "bomb.bundle")
                data = bundle_bomb(git_dir, base, out, paths=BOMB_PATHS, blob_bytes=BOMB_BLOB)
            finally:
                space.remove()
            with Database(db_path) as db:
                found = _case(
                    name,
                    lambda db=db, claimed=claimed, data=data: record_proposal(
                        db, str(claimed["task_id"]), data, lease_token=str(claimed["lease_token"])
                    ),
                )
            cases.append({**found, "bundle_bytes": len(data)})
            print(json.dumps(cases[-1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
