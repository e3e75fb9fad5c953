"""Embedding aios-ledger's pure core: a program that uses only `aios_ledger.core`'s public API.

The core does no I/O: it reads no clock, no database and no environment. An embedder brings
its own rows, its own storage and its own clock, and the core decides. This program does, with
plain values of its own, what the ledger's SQLite shell does:

1. structure a request from an untrusted mapping (strictly: a wrong type or an unknown field is
   a `LedgerError` with the code `FIELDS_INVALID`, never a coercion);
2. project an execution envelope from a governed binding, and check its digest;
3. decide a claim, then a heartbeat, on a task row and a log tail built from plain values;
4. verify an exported log (`aios-ledger log export --all`) with the core's verifier, and see a
   tampered copy of it fail.

    python tests/embedding/embed_core.py EXPORT.jsonl

`tests/test_embedding.py` runs it, and checks it with `mypy --strict`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from aios_ledger.core import (
    ClaimAnswer,
    ClaimRequest,
    GovernedExecutionBinding,
    HeartbeatAnswer,
    HeartbeatRequest,
    JsonObject,
    LedgerError,
    LogTail,
    TaskCreateCommand,
    TaskRow,
    TaskState,
    TaskStatus,
    Timestamp,
    VerificationReport,
    WritePlan,
    chain_of,
    decide_claim,
    decide_heartbeat,
    lease_token_sha256,
    project_execution_envelope,
    verify_execution_envelope,
    verify_export_lines,
)

# The clock is an input. Any RFC 3339 offset is read as UTC, in the ledger's one text form.
NOW = Timestamp.parse("2026-08-20T11:00:00+02:00")
# A lease token is the claimer's secret (16 to 256 characters): the core keeps only its sha256.
LEASE_TOKEN = "embedder-lease-token-0001"


def structure_a_request() -> TaskCreateCommand:
    """A task to create, from a mapping as it would arrive over the wire."""
    command = TaskCreateCommand.from_mapping(
        {
            "task": {
                "goal": "Fix the flaky upload test",
                "instructions": "Keep it small.",
                "required_capabilities": ["python"],
                "deadline": "2026-09-01T12:00:00+02:00",
            },
            "idempotency_key": "create-embedded-1",
        }
    )
    assert command.task.deadline == "2026-09-01T10:00:00Z"  # normalised to the stored form
    try:
        TaskCreateCommand.from_mapping(
            {"task": {"goal": 7, "instructions": "i", "colour": "red"}, "idempotency_key": "k"}
        )
    except LedgerError as refused:
        # One refusal names every problem: the goal's type and the unknown field.
        assert refused.code == "FIELDS_INVALID"
        assert "task.goal" in refused.detail and "colour" in refused.detail
    else:
        raise AssertionError("a goal that is not text was accepted")
    return command


def envelope_of_a_binding() -> JsonObject:
    """The execution envelope of a runtime action on a governed binding, and its digest."""
    binding = GovernedExecutionBinding.from_mapping(
        {
            "task_id": "task-embedded-1",
            "job_id": "job-embedded-1",
            "repository": "aios/aios",
            "base_oid": "a" * 40,
            "expected_branch_oid": "a" * 40,
            "target_branch": "agent/task-embedded-1",
            "branch_mode": "CREATE_NEW",
            "generation": 1,
            "idempotency_key": "binding-embedded-1",
        }
    )
    envelope = project_execution_envelope(
        binding,
        {
            "action": "agent_runtime",
            "adapter": "openclaw",
            "capability_scope": ["agent.runtime.openclaw"],
            "runtime_input": {"goal": "Fix the flaky upload test"},
        },
    )
    # Checking an envelope recomputes its digest: an edited envelope is refused.
    assert verify_execution_envelope(envelope)["execution_digest"] == envelope["execution_digest"]
    return envelope


def stored_task(task_id: str) -> TaskRow:
    """A QUEUED task as the embedder's own storage holds it: the `tasks` columns, plain values."""
    return TaskRow.from_row(
        {
            "task_id": task_id,
            "goal": "Fix the flaky upload test",
            "instructions": "Keep it small.",
            "success_criteria_json": "[]",
            "required_capabilities_json": '["python"]',
            "constraints_json": "{}",
            "metadata_json": "{}",
            "deadline": None,
            "priority": 0,
            "max_attempts": 3,
            "attempt": 0,
            "status": "QUEUED",
            "claimed_by": None,
            "lease_token_hash": None,
            "lease_expires_at": None,
            "result_json": None,
            "result_digest": None,
            "result_idempotency_key": None,
            "verification_json": None,
            "revision": 1,
            "created_at": "2026-08-20T08:00:00Z",
            "updated_at": "2026-08-20T08:00:00Z",
        }
    )


def claim_then_heartbeat() -> tuple[ClaimAnswer, HeartbeatAnswer]:
    task = stored_task("task-embedded-1")
    # The log's tail: the id the next event gets, and the tip of each chain the decision
    # extends (the task's chain holds no event yet here, so it starts from the genesis seal).
    tail = LogTail.read(1, [chain_of(task.task_id)], [])
    request = ClaimRequest.from_mapping(
        {"agent_id": "agent-7", "capabilities": ["python"], "lease_seconds": 60}
    )
    claim = decide_claim(TaskState(task=task, tail=tail), request, now=NOW, lease_token=LEASE_TOKEN)
    # None: nothing to claim; a Replay: an idempotent claim answered again. Here: a plan.
    assert isinstance(claim, WritePlan) and claim.tail is not None
    # Applying a plan is the embedder's part: each statement names a registered SQL statement
    # and binds its parameters; a guarded one must change exactly one row, else the whole
    # transaction is rolled back (the row moved on since it was read).
    names = [str(write.statement) for write in claim.statements()]
    assert names == ["tasks_cas_update", "insert_event", "insert_seal", "insert_sealed_row"]
    (event,) = claim.events
    assert (event.event.event_id, event.seal.chain_seq, event.event.event_type) == (
        1,
        1,
        "TASK_CLAIMED",
    )
    answer = claim.response
    assert answer["status"] == TaskStatus.CLAIMED and answer["lease_token"] == LEASE_TOKEN

    # The row as the plan left it, and the log's tail after its event: what the next decision
    # reads. A heartbeat half a minute later extends the lease to a minute from then.
    claimed = task._replace(
        status=answer["status"],
        attempt=answer["attempt"],
        revision=answer["revision"],
        claimed_by=answer["claimed_by"],
        lease_token_hash=lease_token_sha256(LEASE_TOKEN),
        lease_expires_at=answer["lease_expires_at"],
        updated_at=NOW.text,
    )
    later = NOW.plus_seconds(30)
    beat = decide_heartbeat(
        TaskState(task=claimed, tail=claim.tail),
        HeartbeatRequest.from_mapping(
            {"task_id": task.task_id, "lease_token": LEASE_TOKEN, "lease_seconds": 60}
        ),
        now=later,
    )
    assert beat.response["lease_expires_at"] == later.plus_seconds(60).text
    return answer, beat.response


def verify_exported_log(text: str) -> VerificationReport:
    """An export's lines checked offline: every event's seal and chain, and the trailer."""
    return verify_export_lines(text.splitlines())


def tampered(text: str) -> str:
    """The export with the first event's payload edited, its seal left as it was."""
    lines = text.splitlines()
    event = json.loads(lines[1])
    event["payload_json"] = json.dumps({"edited": True})
    lines[1] = json.dumps(event, sort_keys=True, separators=(",", ":"))
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write(f"usage: {argv[0]} EXPORT.jsonl\n")
        return 2
    command = structure_a_request()
    envelope = envelope_of_a_binding()
    claim, beat = claim_then_heartbeat()
    export = Path(argv[1]).read_text()
    report = verify_exported_log(export)
    edited = verify_exported_log(tampered(export))
    assert report.intact and not edited.intact
    assert [finding.code for finding in edited.findings] == ["CONTENT_CHANGED"]
    print(f"structured: {command.task.goal!r} under key {command.idempotency_key!r}")
    print(f"envelope: {envelope['execution_digest']}")
    print(f"claimed: {claim['task_id']} until {claim['lease_expires_at']}")
    print(f"heartbeat: until {beat['lease_expires_at']}")
    print(f"export: {report.events} events intact; tampered: {edited.finding_counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
