"""A ledger with something on every console page, for the pages' tests and `make screenshots`
(tools/screenshots.py): a registered repository with a landed, attested governed write, a
signed checkpoint, a revoked token, a lease that expired, and tasks queued, claimed (with a
heartbeat), submitted, verified, sent back for rework and cancelled through the API of a
running server."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aios_ledger.core.timestamps import Timestamp
from aios_ledger.shell.api.tokens import issue_token, revoke_token
from aios_ledger.shell.attest.keys import generate_key
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.governed.writes import governed_write
from aios_ledger.shell.proofs.checkpoints import sign_checkpoint
from aios_ledger.shell.tasks.ledger import TaskLedger
from api_server import Scenario, Served
from git_support import binding, make_repository, register, verified_proposal

REVOKED = "retired-agent"
EXPIRED_TASK = "task-lease-expired"
LANDED_TASK = "task-landed"


def seed_ledger(root: Path, path: Path) -> dict[str, Any]:
    """Before the server starts (set PROPOSALS_DIR_ENV first): the repository, its landed
    write, a revoked token and a checkpoint. Returns the landed write's answer."""
    bare, base = make_repository(root)
    register(path, bare)
    verified_proposal(path, LANDED_TASK, binding(LANDED_TASK, base), {"src/a.py": "print(1)\n"})
    key = generate_key("ledger.test")
    with Database(path) as db:
        landed = dict(
            governed_write(
                db, {"task_id": LANDED_TASK, "idempotency_key": "w-landed"}, attest_key=key
            )
        )
        issue_token(db, REVOKED, ["agent"], any_capability=True)
        revoke_token(db, REVOKED)
        sign_checkpoint(db, key.signer, Timestamp.parse("2026-12-01T00:00:00Z"))
        expire_a_lease(db)
    return landed


def expire_a_lease(db: Database) -> None:
    """A task of one attempt whose 1-second lease runs out (it fails: `TASK_LEASE_EXPIRED`),
    for the Health page's lease expiries: the ledger's clock is set 1.5 s forward, the
    lease's second passing."""
    started = datetime.now(UTC)
    passed = [timedelta(0)]
    ledger = TaskLedger(database=db, clock=lambda: started + passed[0])
    task = {"task_id": EXPIRED_TASK, "goal": "a lease let go", "instructions": "i"}
    ledger.create_task({**task, "max_attempts": 1}, idempotency_key="seed-expired")
    ledger.claim(agent_id="agent-gone", capabilities=[], lease_seconds=1, task_id=EXPIRED_TASK)
    passed[0] = timedelta(seconds=1.5)
    assert ledger.expire_leases()["count"] == 1


def seed_tasks(server: Served) -> Scenario:
    """Tasks in each state through the running server's API."""
    scene = Scenario(server)
    for _ in range(3):
        scene.queued(goal=f"queued goal {secrets.token_hex(3)}")
    task_id, lease = scene.claimed()
    beat = scene.agent.post(
        f"/v1/tasks/{task_id}/heartbeat", json={"lease_token": lease, "lease_seconds": 300}
    )
    assert beat.status_code == 200, beat.text
    for decision in ("SUCCEEDED", "NEEDS_REWORK", "FAILED"):
        submitted = scene.submitted()
        judged = scene.reviewer.post(
            f"/v1/tasks/{submitted}/verification",
            json={"decision": decision, "reason": "seen", "idempotency_key": scene.key()},
        )
        assert judged.status_code == 200, judged.text
    scene.cancelled()
    return scene
