"""What the ledger knows of a landed governed write, read from its rows and its task's events:
the `CommitFacts` its attestations are made of, and the record `why COMMIT` shows."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from aios_ledger.core import LedgerError, TaskRow
from aios_ledger.core.actors import actor_public
from aios_ledger.core.attest import CommitFacts
from aios_ledger.core.git import GovernedWriteRow, ProposalRow
from aios_ledger.core.git.decisions import task_binding
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, loads_document
from aios_ledger.core.tasks.attempts import evidence_run, evidence_session
from aios_ledger.shell.db.run import Connection, fetch_all, fetch_record
from aios_ledger.shell.git.repos import require_repository


def ledger_version() -> str:
    try:
        return version("aios-ledger")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0+unknown"


def task_events(conn: Connection, task_id: str) -> list[dict[str, Any]]:
    """The task's events in order, each with its payload parsed and its seal."""
    return [sealed_event(row) for row in fetch_all(conn, "log_export_task", {"task_id": task_id})]


def sealed_event(row: Mapping[str, Any]) -> dict[str, Any]:
    """An event row with its seal's columns (the `sealed_events` fragment's), its payload parsed."""
    event = dict(row)
    event["payload"] = loads_document(str(row["payload_json"]), what="payload_json")
    del event["payload_json"]
    event["actor"] = actor_public(row.get("actor"))
    return event


def attempt_reviews(conn: Connection, task_id: str, attempt: int) -> list[dict[str, Any]]:
    """The auxiliary review runs of one attempt's evidence."""
    evidence = {"session_id": evidence_session(task_id), "run_id": evidence_run(task_id, attempt)}
    rows = fetch_all(conn, "list_auxiliary_runs", {"state": None, **evidence, "limit": 100})
    return [dict(row) for row in rows]


def _last(
    events: list[dict[str, Any]], kind: str, attempt: int | None = None
) -> dict[str, Any] | None:
    found = None
    for event in events:
        payload = event["payload"]
        if event["event_type"] != kind:
            continue
        if attempt is not None and isinstance(payload, dict) and payload.get("attempt") != attempt:
            continue
        found = event
    return found


def attempt_events(events: list[dict[str, Any]], attempt: int) -> tuple[dict[str, Any] | None, ...]:
    """The attempt's claim, submission and the verdict that followed it, among the task's
    `events` in order."""
    claim = _last(events, "TASK_CLAIMED", attempt)
    submitted = _last(events, "RESULT_SUBMITTED", attempt)
    verified = None
    if submitted is not None:
        later = [e for e in events if e["event_id"] > submitted["event_id"]]
        verified = next((e for e in later if e["event_type"] == "TASK_VERIFIED"), None)
    return claim, submitted, verified


def verdict_reviewer(verified: dict[str, Any] | None) -> str | None:
    """Who verified: the reviewer the verdict's payload names, else (an older verdict) its
    event's agent."""
    if verified is None:
        return None
    reviewer = (
        verified["payload"].get("reviewer") if isinstance(verified["payload"], dict) else None
    )
    if isinstance(reviewer, str):
        return reviewer
    return None if verified["agent_id"] is None else str(verified["agent_id"])


def commit_facts(conn: Connection, write: GovernedWriteRow) -> CommitFacts:
    """The facts of a landed write, from the ledger as it stands (read in one transaction)."""
    task = fetch_record(conn, "get_task", {"task_id": write.task_id}, TaskRow)
    if task is None:
        raise LedgerError("TASK_NOT_FOUND", f"no task {write.task_id!r}")
    proposals = [
        ProposalRow.from_row(row)
        for row in fetch_all(conn, "task_proposals_of_task", {"task_id": task.task_id})
    ]
    proposal = next((p for p in proposals if p.proposal_id == write.proposal_id), None)
    if proposal is None:
        raise LedgerError("PROPOSAL_NOT_FOUND", f"no proposal {write.proposal_id!r}")
    attempt = proposal.attempt
    binding = task_binding(task)
    envelope = task.metadata().get("execution")
    assert isinstance(envelope, dict)
    events = task_events(conn, task.task_id)
    claim, submitted, verified = attempt_events(events, attempt)
    verdict: JsonObject = verified["payload"] if verified is not None else {}
    reviews = [r for r in attempt_reviews(conn, task.task_id, attempt) if r["state"] == "COMPLETED"]
    review = reviews[-1] if reviews else None
    capabilities: list[str] = [str(c) for c in task.required_capabilities()]
    scope = envelope.get("capability_scope")
    if isinstance(scope, list):
        capabilities += [str(c) for c in scope if str(c) not in capabilities]
    success_criteria: JsonValue = task.success_criteria()
    return CommitFacts(
        repository=write.repository,
        branch=binding.target_branch,
        ref=write.ref,
        commit_oid=write.new_oid,
        base_oid=proposal.base_oid,
        old_oid=write.old_oid,
        write_key=write.idempotency_key,
        task_id=task.task_id,
        attempt=attempt,
        agent_id=proposal.agent_id,
        capabilities=tuple(capabilities),
        envelope=envelope,
        execution_digest=str(envelope.get("execution_digest")),
        evidence_digest=None if review is None else str(review["evidence_digest"]),
        proposal_id=proposal.proposal_id,
        bundle_sha256=proposal.bundle_sha256,
        result_digest=task.result_digest if task.attempt == attempt else None,
        changed_files=write.changed_files(),
        started_on=None if claim is None else str(claim["created_at"]),
        finished_on=None if submitted is None else str(submitted["created_at"]),
        applied_on=write.updated_at,
        decision=str(verdict.get("decision", task.status)),
        reason=None if verdict.get("reason") is None else str(verdict.get("reason")),
        verified_on=None if verified is None else str(verified["created_at"]),
        reviewer=verdict_reviewer(verified),
        review_id=None if review is None else str(review["aux_id"]),
        review_output_digest=None if review is None else review["output_digest"],
        success_criteria=success_criteria,
        governance=proposal.facts(),
        ledger_version=ledger_version(),
        # The URL sealed with a repository on a git server (None: governed in place).
        repository_url=require_repository(conn, write.repository).remote_url,
    )
