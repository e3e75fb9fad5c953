"""docs/conformance.md alone reproduces every seal of a real export, on both engines.

A ledger is driven through every kind of event that seals differently (tasks created, claimed,
submitted, verified, sent back, expired, cancelled and retried; a projection and its governed
binding; a governed write with its attestation; a repository's settings; runs, their events and
an auxiliary run over them; API tokens; an archive), exported, and checked by
`conformance_support.check_export`, a verifier written from the page with the standard library
alone: every line of every chain, the task rows folded from v4 seals, the state lines, the head
and the trailer, of the export of everything, of each task's and of the archive's file. A line
changed against the page's rules is reported, at that line.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.auxiliary import AuxiliaryCapabilityProfile, AuxiliaryRunSpec, ExecutionFrame
from aios_ledger.core.log import verify_export_lines
from aios_ledger.core.runs import EvidenceReadRequest, ExecutionTarget
from aios_ledger.core.sealed_tables import SEALED_TABLES
from aios_ledger.shell import (
    AuxiliaryRunContext,
    AuxiliaryRunService,
    Database,
    RunEvidenceReader,
    RunStore,
    TaskLedger,
    archive_tasks,
    change_repository_settings,
    export_log,
    governed_write,
    issue_token,
    ledger_head,
    revoke_token,
)
from aios_ledger.shell.attest.keys import generate_key
from aios_ledger.shell.clock import AUTHORIZATION_ENV
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV
from conformance_support import (
    CHAINED_FIELDS,
    EMPTY_HEAD,
    GENESIS_SEAL,
    ExportCheck,
    check_export,
    event_seal,
    roll_head,
)
from conftest import both_engines
from git_support import OWNER, REPOSITORY, binding, make_repository, register, verified_proposal
from test_log_support import raw_rows

pytest_generate_tests = both_engines

LANDED = "t-landed"
PROPOSED = "t-proposed"
# The tasks the archive takes (finished, no governed write), and those it leaves (one landed by
# a governed write, the others queued again or never claimed).
ARCHIVED = ("t-done", "t-cancelled", PROPOSED)
KEPT = ("t-landed", "t-rework", "t-retried", "t-open")
STATE_TABLES = {
    "api_tokens",
    "auxiliary_runs",
    "commit_attestations",
    "governed_bindings",
    "governed_repositories",
    "governed_writes",
    "repository_settings_changes",
    "run_events",
    "runs",
    "task_idempotency",
    "task_initial_execution_projections",
    "task_proposals",
    "task_spend",
    "tasks",
    "writer_leases",
}


class _Executor:
    async def execute(self, context: AuxiliaryRunContext) -> Any:
        return {"decision": "ok"}


def _task(ledger: TaskLedger, task_id: str, **extra: Any) -> None:
    ledger.create_task(
        {"task_id": task_id, "goal": "g", "instructions": "i", **extra},
        idempotency_key=f"create-{task_id}",
    )


def _claim(ledger: TaskLedger, task_id: str, lease_seconds: int = 600) -> str:
    claimed = ledger.claim(
        agent_id="agent-1", capabilities=[], lease_seconds=lease_seconds, task_id=task_id
    )
    assert claimed is not None
    return str(claimed["lease_token"])


def _later() -> Callable[[], datetime]:
    return lambda: datetime.now(UTC) + timedelta(hours=1)


def _tasks(target: Path) -> None:
    """Claims, heartbeats, submissions, verdicts (accepted, sent back), a lease that ran out,
    a cancel and retries; one task's attempt run holds run events of the ledger chain."""
    with TaskLedger(target) as ledger:
        for task_id in ("t-done", "t-rework", "t-cancelled", "t-open"):
            _task(ledger, task_id)
        _task(ledger, "t-retried", max_attempts=1)
        token = _claim(ledger, "t-done")
        with RunStore(target) as runs:  # the claim's evidence run
            runs.append_event("t-done@1", "step", {"n": 1}, lease_token=token)
        ledger.submit_result("t-done", lease_token=token, result={"ok": 1}, idempotency_key="s-1")
        ledger.verify("t-done", decision="SUCCEEDED", reason="fine", idempotency_key="v-1")
        token = _claim(ledger, "t-rework")
        ledger.heartbeat("t-rework", lease_token=token, lease_seconds=600)
        usage = {"input_tokens": 10, "output_tokens": 5}
        ledger.submit_result(
            "t-rework", lease_token=token, result={}, idempotency_key="s-2", usage=usage
        )
        ledger.verify("t-rework", decision="NEEDS_REWORK", reason="again", idempotency_key="v-2")
        ledger.cancel("t-cancelled", reason="not needed", idempotency_key="c-1")
        _claim(ledger, "t-retried", lease_seconds=1)
    with TaskLedger(target, clock=_later()) as later:
        assert later.expire_leases()["count"] == 1
        later.retry("t-retried", reason="once more", idempotency_key="r-1")


def _runs_and_auxiliary(target: Path) -> None:
    with RunStore(target) as runs:
        runs.create_run("session-1", "review the widgets", run_id="r-1")
        for number in (1, 2):
            runs.append_event("r-1", "step", {"n": number})
        evidence = RunEvidenceReader(runs).read(
            EvidenceReadRequest(ExecutionTarget("session-1", "r-1"))
        )
    spec = AuxiliaryRunSpec(
        ExecutionFrame.root(evidence.target), "fixture", "inspect", evidence.snapshot_digest
    ).with_id("aux-1")
    service = AuxiliaryRunService(_Executor(), target)

    async def spawn() -> None:
        spec_tool_free = spec.with_capabilities(AuxiliaryCapabilityProfile.tool_free())
        await (await service.spawn(spec_tool_free, evidence)).wait()
        await service.aclose()

    asyncio.run(spawn())


def _governed(target: Path, root: Path) -> None:
    """A repository registered and its settings changed; a task bound, projected, claimed,
    proposed, verified and written, its write attested."""
    bare, base = make_repository(root)
    register(target, bare)
    verified_proposal(target, LANDED, binding(LANDED, base), {"widget.txt": "improved\n"})
    # Verified and never written: archived with its proposal's bundle.
    verified_proposal(target, PROPOSED, binding(PROPOSED, base), {"notes.txt": "later\n"})
    with Database(target) as db:
        change_repository_settings(
            db, REPOSITORY, {"scan_max_seconds": 60}, idempotency_key="settings-1"
        )
        request = {"task_id": LANDED, "idempotency_key": "write-1"}
        governed_write(db, request, attest_key=generate_key("ledger.test"))


def _tokens(target: Path) -> None:
    with Database(target) as db:
        issue_token(db, "agent-token", ["agent"], any_capability=True)
        issue_token(db, "retired", ["agent"], capabilities=["agent.runtime.openclaw"])
        revoke_token(db, "retired")


def _archive(target: Path, root: Path) -> None:
    with Database(target) as db:
        answer = archive_tasks(
            db, finished_before="2100-01-01T00:00:00Z", output=root / "archive.jsonl"
        )
    assert sorted(answer["task_ids"]) == sorted(ARCHIVED)


@pytest.fixture
def ledger(ledger_target: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    _tasks(ledger_target)
    _governed(ledger_target, tmp_path)
    _runs_and_auxiliary(ledger_target)
    _tokens(ledger_target)
    _archive(ledger_target, tmp_path)
    with TaskLedger(ledger_target) as after:  # events after the archive's
        token = _claim(after, "t-open")
        after.release("t-open", lease_token=token, reason="later")
    return ledger_target


def export_lines(target: Path, task_id: str | None = None) -> list[str]:
    out = io.StringIO()
    with Database(target) as db:
        export_log(db, out, task_id=task_id)
    return out.getvalue().splitlines()


def _clean(found: ExportCheck) -> ExportCheck:
    assert found.problems == []
    return found


def test_the_page_reproduces_every_seal_of_an_export(ledger: Path, tmp_path: Path) -> None:
    lines = export_lines(ledger)
    found = _clean(check_export(lines))
    with Database(ledger) as db:
        head = ledger_head(db).public()
    assert (found.events, found.last_event_id, found.head) == (
        head["events"],
        head["last_event_id"],
        head["digest"],
    )
    stored = raw_rows(ledger, "SELECT chain, chain_seq, seal FROM event_seals")
    tips: dict[str, tuple[int, str]] = {}
    for chain, chain_seq, seal in stored:
        if chain_seq > tips.get(chain, (0, ""))[0]:
            tips[chain] = (chain_seq, seal)
    assert found.tips == tips
    # Every state table but a source capture's recovery and a refused scan's charge, whose
    # rows are sealed as images like the others.
    assert found.state_tables == STATE_TABLES
    # Task rows are proven by folding their changes, on both engines.
    assert found.folded_rows == len(KEPT)

    events = [json.loads(line) for line in lines[1:] if '"event_type"' in line]
    assert {event["seal_version"] for event in events} == {5}
    kinds = {event["event_type"] for event in events}
    assert kinds >= {
        "TASK_CREATED",
        "TASK_CLAIMED",
        "TASK_HEARTBEAT",
        "RESULT_SUBMITTED",
        "TASK_VERIFIED",
        "TASK_LEASE_EXPIRED",
        "TASK_REQUEUED",
        "TASK_RELEASED",
        "GOVERNED_BINDING_REGISTERED",
        "TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED",
        "PROPOSAL_RECORDED",
        "GOVERNED_WRITE_INTENDED",
        "GOVERNED_WRITE_APPLIED",
        "COMMIT_ATTESTED",
        "REPOSITORY_REGISTERED",
        "REPOSITORY_SETTINGS_CHANGED",
        "RUN_CREATED",
        "RUN_EVENT_APPENDED",
        "API_TOKEN_ISSUED",
        "API_TOKEN_REVOKED",
        "TASKS_ARCHIVED",
    }, kinds
    assert any(event["event_type"].startswith("AUXILIARY_") for event in events), kinds
    assert any('"archived"' in line for line in lines)
    ledger_lines = [event for event in events if event["chain"] == "ledger"]
    # Every line carries both chained row fields; the ledger chain's are null.
    assert all(set(CHAINED_FIELDS) <= set(event) for event in events)
    assert {(e["row_changes"], e["chained_row_digest"]) for e in ledger_lines} == {(None, None)}

    # The archive's file: the archived tasks' chains whole, and their rows.
    archive = (tmp_path / "archive.jsonl").read_text("ascii").splitlines()
    archived = _clean(check_export(archive))
    assert set(archived.tips) == {"task:" + task_id for task_id in ARCHIVED}
    assert archived.state_tables >= {"tasks", "run_events", "governed_bindings", "task_proposals"}
    assert archived.bundles == 1
    # A task's goal changed in the file is reported at its state line.
    row = next(i for i, line in enumerate(archive) if line.endswith('"state":"tasks"}'))
    changed = _mutated(archive, row, lambda line: line["row"].update(goal="another goal"))
    assert check_export(changed).lines_with_problems() == {row + 1}

    for task_id in KEPT:
        found = _clean(check_export(export_lines(ledger, task_id)))
        assert set(found.tips) == {"task:" + task_id}
        assert found.tips["task:" + task_id] == tips["task:" + task_id]


def _event_line(lines: list[str], test: Callable[[dict[str, Any]], bool]) -> int:
    return next(
        index
        for index, line in enumerate(lines)
        if '"event_type"' in line and test(json.loads(line))
    )


def _mutated(lines: list[str], index: int, change: Callable[[dict[str, Any]], None]) -> list[str]:
    line = json.loads(lines[index])
    change(line)
    return [*lines[:index], json.dumps(line), *lines[index + 1 :]]


# Each change: which event line it takes (the first that matches) and what it does to it.
Mutation = tuple[Callable[[dict[str, Any]], bool], Callable[[dict[str, Any]], None]]
MUTATIONS: dict[str, Mutation] = {
    "a ledger event's payload": (
        lambda line: line["event_type"] == "RUN_EVENT_APPENDED",
        lambda line: line.update(payload_json='{"forged":true}'),
    ),
    "a task event's actor": (
        lambda line: line["event_type"] == "TASK_VERIFIED" and line["actor"] is not None,
        lambda line: line.update(actor=None),
    ),
    "a sealed row's digest": (
        lambda line: line["event_type"] == "API_TOKEN_ISSUED",
        lambda line: line["rows"][0].update(digest="sha256:" + "1" * 64),
    ),
    "a chain position": (
        lambda line: line["event_type"] == "TASK_RELEASED",
        lambda line: line.update(chain_seq=line["chain_seq"] + 1),
    ),
}
CHAINED_MUTATIONS: dict[str, Mutation] = {
    "a task row's changes": (
        lambda line: line["event_type"] == "TASK_RELEASED",
        lambda line: line.update(row_changes=line["row_changes"].replace("QUEUED", "CLAIMED")),
    ),
    "a chained row digest": (
        lambda line: line["event_type"] == "TASK_CLAIMED",
        lambda line: line.update(chained_row_digest="sha256:" + "2" * 64),
    ),
    "task row changes on the ledger chain": (
        lambda line: line["chain"] == "ledger",
        lambda line: line.update(row_changes="{}"),
    ),
}


def small_ledger(target: Path) -> Path:
    """A task verified, one released, a run's event and two tokens: a line of each kind the
    changes below take, without the whole fixture's cost."""
    with TaskLedger(target) as ledger:
        _task(ledger, "t-1")
        _task(ledger, "t-2")
        token = _claim(ledger, "t-1")
        ledger.submit_result("t-1", lease_token=token, result={}, idempotency_key="s-1")
        ledger.verify("t-1", decision="SUCCEEDED", reason="fine", idempotency_key="v-1")
        ledger.release("t-2", lease_token=_claim(ledger, "t-2"), reason="later")
    with RunStore(target) as runs:
        runs.create_run("session-1", "a run", run_id="r-1")
        runs.append_event("r-1", "step", {"n": 1})
    _tokens(target)
    return target


def test_a_line_changed_against_the_pages_rules_is_reported_at_that_line(
    ledger_target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    lines = export_lines(small_ledger(ledger_target))
    _clean(check_export(lines))
    cases = {**MUTATIONS, **CHAINED_MUTATIONS}
    for name, (which, change) in cases.items():
        index = _event_line(lines, which)
        found = check_export(_mutated(lines, index, change))
        # Line numbers count from 1. A change may break a later line too (the state line of a
        # row whose sealed digest changed), never leave its own line unreported.
        assert index + 1 in found.lines_with_problems(), (name, found.problems)
    state = next(i for i, line in enumerate(lines) if line.startswith('{"digest"'))
    found = check_export(_mutated(lines, state, lambda line: line.update(digest=None)))
    assert found.lines_with_problems() == {state + 1}


def _as_written_by_0x_sqlite(lines: list[str]) -> list[str]:
    """The export as a 0.x SQLite ledger wrote it: each seal v4 (v5 over the event id too),
    chained again by the page's rules, and a line whose two chained row values are null
    without them (as an export written before 1.0 left them out)."""
    tips: dict[str, tuple[int, str]] = {}
    head, events, last = EMPTY_HEAD, 0, 0
    old = []
    for text in lines:
        line = json.loads(text)
        if "end" in line:
            line.update(events=events, last_event_id=last, digest=head)
        elif "event_type" in line:
            seq, prev = tips.get(line["chain"], (0, GENESIS_SEAL))
            chained = (line["row_changes"], line["chained_row_digest"])
            seal = event_seal(line, seq + 1, prev, 4, line["rows"], chained)
            line.update(seal_version=4, prev_seal=prev, seal=seal)
            tips[line["chain"]] = (seq + 1, seal)
            head, events, last = (
                roll_head(head, line["event_id"], seal),
                events + 1,
                line["event_id"],
            )
            if chained == (None, None):
                for name in CHAINED_FIELDS:
                    del line[name]
        old.append(json.dumps(line))
    return old


def test_an_export_a_0x_ledger_wrote_is_refused(tmp_path: Path) -> None:
    """A 0.x SQLite ledger's export (v4 seals, a line whose two chained row values were null
    leaving both out) follows the page's 0.x rules, which only `upgrade` verifies: 1.0's
    verifier refuses the file, saying so."""
    target = small_ledger(tmp_path / "ledger.sqlite3")
    old = _as_written_by_0x_sqlite(export_lines(target))
    assert any('"seal_version": 4' in line and "row_changes" not in line for line in old)
    _clean(check_export(old))
    with pytest.raises(LedgerError) as refused:
        verify_export_lines(old, SEALED_TABLES)
    assert refused.value.code == "EXPORT_OF_0X_SEALS"
