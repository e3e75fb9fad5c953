"""An agent over its scan budget (per repository, per window: 0.x migration 0013), through a real
`aios-ledger serve`, real git and a real governed repository, on both engines.

An agent's first proposal is recorded with what its scan spent, sealed; the owner lowers the
repository's agent budget to that spend; the agent's next proposal is refused 429
`AGENT_SCAN_BUDGET_EXCEEDED` with `Retry-After` before its body is read (a body that is not
even base64 gets the same answer), leaving nothing behind: no bundle on disk, no row, no event,
the repository byte for byte as it was. The cheap checks still come first (another agent's
task is 403, a wrong lease 409), another agent's proposals to the same repository are not its
budget, and once the window has passed the same agent is scanned again. A scan refused over its
budget records no proposal, but what it cost is charged to its agent (sealed
`PROPOSAL_SCAN_CHARGED`): an attempt that asks for it again is refused once its window is spent.

Figures: 9 hostile uploads tried per engine, 9 refused, each leaving nothing behind but, for a
scan over its budget, its charge: 6 by the
agent whose window is spent (a bundle and a body that is not base64 over HTTP, 429 with
`Retry-After`; a wrong lease, 409 `LEASE_INVALID` first; one through `LedgerClient`, raised as a
`RetryLaterError`; two through the library, the second under a shorter window) and 1 by another
agent to its task (403 `NOT_TASK_HOLDER` first); and a scan over its budget (413, charged)
asked for again by its attempt (429). 3 controls recorded: its first proposal, another
agent's, and its own once the window has passed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.core import LedgerError, RetryLaterError
from aios_ledger.shell import Database, LedgerClient, verify_log
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV, record_proposal
from aios_ledger.shell.git.repos import change_repository_settings
from aios_ledger.shell.git.workspace import LEASE_TOKEN_HEADER, Workspace
from api_server import SECOND_AGENT, ApiServer
from conftest import both_engines
from git_support import (
    CAPABILITY,
    REPOSITORY,
    binding,
    edit,
    events_of,
    governed_task,
    make_repository,
    prepare_workspace,
    register,
    repository_files,
)
from legacy_fixtures import rows
from test_hostile_agent_secrets import _bundle

pytest_generate_tests = both_engines


class Live:
    def __init__(self, server: ApiServer, target: Path | str, bare: Path, base: str) -> None:
        self.server, self.target, self.bare, self.base = server, target, bare, base
        self.proposals = Path()


@pytest.fixture
def live(
    ledger_target: Path | str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Live]:
    proposals = tmp_path / "proposals"
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(proposals))
    with ApiServer(ledger_target, role_tokens=True) as server:
        bare, base = make_repository(tmp_path)
        register(ledger_target, bare)
        found = Live(server, ledger_target, bare, base)
        found.proposals = proposals
        yield found
        with Database(ledger_target) as opened:
            report = verify_log(opened)
        assert report.intact, report.public()


def _claimed(live: Live, task_id: str, agent: str = "agent") -> tuple[dict[str, Any], bytes]:
    """`task_id` created, bound, projected and claimed by `agent` over HTTP, and the bundle of a
    clean commit in its workspace."""
    governed_task(live.target, task_id, binding(task_id, live.base))
    answer = live.server.client(agent).post(
        "/v1/claims",
        json={"capabilities": [CAPABILITY], "lease_seconds": 600, "task_id": task_id},
    )
    assert answer.status_code == 200, answer.text
    claimed = dict(answer.json())
    with Database(live.target) as db:
        space = prepare_workspace(db, claimed, agent_id=str(claimed["claimed_by"]))
    assert isinstance(space, Workspace)
    try:
        edit(space, {f"notes-{task_id}.txt": "nothing secret here\n" * 32})
        data = _bundle(live, space)  # type: ignore[arg-type]
    finally:
        space.remove()
    return claimed, data


def _upload(
    live: Live, claimed: Mapping[str, Any], data: bytes | str, agent: str = "agent", **headers: str
) -> httpx.Response:
    text = data if isinstance(data, str) else base64.b64encode(data).decode()
    return live.server.client(agent).post(
        f"/v1/tasks/{claimed['task_id']}/proposal",
        json={"bundle_base64": text},
        headers={LEASE_TOKEN_HEADER: str(claimed["lease_token"]), **headers},
    )


def _left(live: Live) -> tuple[dict[str, bytes], list[str]]:
    """What a refusal must leave as it was: the repository's files and the stored bundles."""
    stored = sorted(p.name for p in live.proposals.iterdir()) if live.proposals.exists() else []
    return repository_files(live.bare), stored


def _settings(live: Live, key: str, **changes: Any) -> None:
    with Database(live.target) as db:
        change_repository_settings(db, REPOSITORY, changes, idempotency_key=key)


def _scan_row(live: Live, task_id: str) -> tuple[Any, ...]:
    query = "SELECT scan_bytes, scan_seconds FROM task_proposals WHERE task_id = ?"
    return tuple(rows(live.target, query, (task_id,))[0])  # type: ignore[arg-type]


def test_an_agent_over_its_window_is_refused_before_its_bundle_is_read(live: Live) -> None:
    # Its first proposal: recorded, with what its scan spent, sealed with it.
    first, data = _claimed(live, "task-first")
    uploaded = _upload(live, first, data)
    assert uploaded.status_code == 201, uploaded.text
    spent = uploaded.json()["scan_bytes"]
    assert spent > 0 and uploaded.json()["scan_seconds"] >= 0
    assert _scan_row(live, "task-first") == (spent, uploaded.json()["scan_seconds"])
    query = "SELECT payload_json FROM events WHERE event_type = 'PROPOSAL_RECORDED'"
    (payload,) = rows(live.target, query)[0]  # type: ignore[arg-type]
    assert json.loads(payload)["scan"] == {
        "bytes": spent,
        "seconds": uploaded.json()["scan_seconds"],
    }
    # The owner allows this agent no more than it spent.
    _settings(live, "spent", agent_scan_max_bytes=spent)

    second, data = _claimed(live, "task-second")
    before = _left(live)
    over = _upload(live, second, data)
    assert over.status_code == 429, over.text
    assert over.json()["code"] == "AGENT_SCAN_BUDGET_EXCEEDED"
    assert 1 <= int(over.headers["Retry-After"]) <= 3600
    assert "agent-1" in over.json()["detail"]
    # Refused before the body is read: a body that is no bundle at all answers the same.
    not_even_base64 = _upload(live, second, "!!! not base64 !!!")
    assert (not_even_base64.status_code, not_even_base64.json()["code"]) == (
        429,
        "AGENT_SCAN_BUDGET_EXCEEDED",
    )
    # The cheap checks still come first: another agent's task, a wrong lease.
    not_holder = _upload(live, second, data, agent=SECOND_AGENT)
    assert (not_holder.status_code, not_holder.json()["code"]) == (403, "NOT_TASK_HOLDER")
    wrong = _upload(live, second, data, **{LEASE_TOKEN_HEADER: "x" * 43})
    assert (wrong.status_code, wrong.json()["code"]) == (409, "LEASE_INVALID")
    # The client raises it as a refusal time lifts.
    client = LedgerClient(live.server.url, live.server.tokens["agent"])
    with pytest.raises(RetryLaterError) as later:
        client.upload_proposal(
            str(second["task_id"]), lease_token=str(second["lease_token"]), bundle=data
        )
    assert later.value.code == "AGENT_SCAN_BUDGET_EXCEEDED" and later.value.retry_after >= 1
    # The library (a local worker's path) refuses it too.
    with Database(live.target) as db, pytest.raises(LedgerError) as local:
        record_proposal(db, "task-second", data, lease_token=str(second["lease_token"]))
    assert local.value.code == "AGENT_SCAN_BUDGET_EXCEEDED"
    assert _left(live) == before
    assert "PROPOSAL_RECORDED" not in events_of(live.target, "task-second")

    # Another agent's proposals to the same repository are its own budget.
    other, other_data = _claimed(live, "task-other", agent=SECOND_AGENT)
    assert _upload(live, other, other_data, agent=SECOND_AGENT).status_code == 201
    before = _left(live)

    # Once the window has passed (the shortest, a minute), the agent is scanned again.
    _settings(live, "short-window", agent_scan_window_seconds=60)
    with Database(live.target) as db, pytest.raises(LedgerError) as still:
        record_proposal(db, "task-second", data, lease_token=str(second["lease_token"]))
    assert still.value.code == "AGENT_SCAN_BUDGET_EXCEEDED"
    assert _left(live) == before

    def later_clock() -> datetime:
        return datetime.now(UTC) + timedelta(seconds=61)

    with Database(live.target) as db:
        answer = record_proposal(
            db, "task-second", data, lease_token=str(second["lease_token"]), clock=later_clock
        )
    assert answer["idempotent"] is False and answer["scan_bytes"] is not None


def test_scans_refused_over_their_budget_are_charged_then_the_agent_is_refused(
    live: Live,
) -> None:
    """A scan that runs past its budget records no proposal, and can be asked for again by the
    same attempt: what it cost is charged to its agent, sealed, so that repeating it is not
    free. Here every scan is over its budget at once, and one charge (at least a millisecond)
    spends the agent's window."""
    _settings(live, "tight", scan_max_seconds=0.000001, agent_scan_max_seconds=0.001)
    claimed, data = _claimed(live, "task-overrun")
    before = _left(live)
    first = _upload(live, claimed, data)
    assert (first.status_code, first.json()["code"]) == (413, "SCAN_BUDGET_EXCEEDED")
    assert _left(live) == before
    assert events_of(live.target, "task-overrun")[-1] == "PROPOSAL_SCAN_CHARGED"
    assert "PROPOSAL_RECORDED" not in events_of(live.target, "task-overrun")
    query = "SELECT charge_id, agent_id, code, scan_seconds FROM agent_scan_charges"
    ((charge_id, agent, code, seconds),) = rows(live.target, query)  # type: ignore[arg-type]
    assert (charge_id, agent, code) == ("task-overrun#1#1", "agent-1", "SCAN_BUDGET_EXCEEDED")
    assert seconds >= 0.001
    # The same attempt asks again: its agent's window is spent, before its body is read.
    again = _upload(live, claimed, "!!! not base64 !!!")
    assert (again.status_code, again.json()["code"]) == (429, "AGENT_SCAN_BUDGET_EXCEEDED")
    assert _left(live) == before
    assert events_of(live.target, "task-overrun").count("PROPOSAL_SCAN_CHARGED") == 1
