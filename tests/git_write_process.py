"""A governed write in a process of its own, for the race and crash tests.

`python tests/git_write_process.py DB TASK_ID KEY [MODE]` prints the answer as JSON, or
`{"code": CODE}` when the write is refused. MODE `kill-before-swap` / `kill-after-swap` makes
this process SIGKILL itself right before / right after git's compare-and-swap (on a remote
repository, the push): the crash
between the intent and its outcome that recovery must reconcile (a hook of this test helper
only; the shell has no such switch). `wait` holds at the start until the file DB.go exists,
so that racing processes start together. With $AIOS_TEST_ATTEST_KEY (a signer key file) the
write is attested with it, its note pushed with the branch to a remote."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from aios_ledger.core import LedgerError
from aios_ledger.shell.attest.keys import load_signer
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git import remotes
from aios_ledger.shell.git.remotes import PushAnswer
from aios_ledger.shell.governed import writes


def main() -> int:
    db_path, task_id, key = sys.argv[1:4]
    mode = sys.argv[4] if len(sys.argv) > 4 else ""
    if mode == "wait":
        go = Path(f"{db_path}.go")
        while not go.exists():
            time.sleep(0.005)
    real = writes.move_ref

    def dying(repository_path: str, ref: str, new: str, old: str, key: str) -> bool:
        if mode == "kill-before-swap":
            os.kill(os.getpid(), signal.SIGKILL)
        moved = real(repository_path, ref, new, old, key)
        if mode == "kill-after-swap":
            os.kill(os.getpid(), signal.SIGKILL)
        return moved

    writes.move_ref = dying
    real_push = remotes.push_write

    def dying_push(*args: Any, **kwargs: Any) -> PushAnswer:
        if mode == "kill-before-swap":
            os.kill(os.getpid(), signal.SIGKILL)
        pushed = real_push(*args, **kwargs)
        if mode == "kill-after-swap":
            os.kill(os.getpid(), signal.SIGKILL)
        return pushed

    remotes.push_write = dying_push
    key_file = os.environ.get("AIOS_TEST_ATTEST_KEY")
    signing = None if key_file is None else load_signer(key_file)
    with Database(db_path) as db:
        try:
            request = {"task_id": task_id, "idempotency_key": key}
            answer: object = writes.governed_write(db, request, attest_key=signing)
        except LedgerError as refused:
            answer = {"code": refused.code, "detail": refused.detail}
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
