"""What the governed-write decisions answer: plain dicts with a checked shape (`TypedDict`)."""

from __future__ import annotations

from typing import NotRequired, TypedDict, cast

from aios_ledger.core.git.records import GovernedWriteRow, ProposalRow, RepositoryRow, ScanChargeRow
from aios_ledger.core.jsonvalue import JsonObject, JsonValue


class AttestationAnswer(TypedDict):
    """What a governed write says of its attestation: made, or not and why not."""

    attested: bool
    commit_oid: str | None
    keyid: str | None
    notes_ref: str
    provenance_sha256: str | None
    review_sha256: str | None
    reason: str | None
    idempotent: bool


class RepositoryAnswer(TypedDict):
    name: str
    path: str
    head_branch: str | None
    protected: list[str]
    revision: int
    settings: dict[str, JsonValue]
    remote_url: str | None
    idempotent: bool


class RepositorySettingsAnswer(TypedDict):
    """A settings change: the settings after it, those it changed, the revision."""

    name: str
    idempotency_key: str
    revision: int
    settings: dict[str, JsonValue]
    changed: list[str]
    idempotent: bool


class ProposalAnswer(TypedDict):
    proposal_id: str
    task_id: str
    attempt: int
    repository: str
    base_oid: str
    head_oid: str
    bundle_sha256: str
    changed_files: list[str]
    facts: dict[str, JsonValue]
    scan_bytes: int | None
    scan_seconds: float | None
    idempotent: bool


class ScanChargeAnswer(TypedDict):
    charge_id: str
    task_id: str
    attempt: int
    agent_id: str
    repository: str
    code: str
    scan_bytes: int
    scan_seconds: float


def scan_charge_answer(row: ScanChargeRow) -> ScanChargeAnswer:
    """The charge's row, by the answer's field names."""
    columns = row._asdict()
    return cast(
        ScanChargeAnswer, {name: columns[name] for name in ScanChargeAnswer.__annotations__}
    )


class WriteAnswer(TypedDict):
    task_id: str
    idempotency_key: str
    repository: str
    ref: str
    old_oid: str
    new_oid: str
    state: str
    code: str | None
    observed_oid: str | None
    changed_files: list[str]
    idempotent: bool
    # An APPLIED write's attestation: made, or why not (`AttestationAnswer`).
    attestation: NotRequired[AttestationAnswer]
    # The pull request of a repository whose settings name a forge: its sealed event's payload,
    # with `state` OPENED or FAILED.
    pull_request: NotRequired[JsonObject]


def repository_answer(row: RepositoryRow, *, idempotent: bool) -> RepositoryAnswer:
    return {
        "name": row.name,
        "path": row.path,
        "head_branch": row.head_branch,
        "protected": list(row.protected()),
        "revision": row.revision,
        "settings": row.settings().public(),
        "remote_url": row.remote_url,
        "idempotent": idempotent,
    }


def proposal_answer(row: ProposalRow, *, idempotent: bool) -> ProposalAnswer:
    return {
        "proposal_id": row.proposal_id,
        "task_id": row.task_id,
        "attempt": row.attempt,
        "repository": row.repository,
        "base_oid": row.base_oid,
        "head_oid": row.head_oid,
        "bundle_sha256": row.bundle_sha256,
        "changed_files": list(row.changed_files()),
        "facts": row.facts(),
        "scan_bytes": row.scan_bytes,
        "scan_seconds": row.scan_seconds,
        "idempotent": idempotent,
    }


def write_answer(row: GovernedWriteRow, *, idempotent: bool) -> WriteAnswer:
    return {
        "task_id": row.task_id,
        "idempotency_key": row.idempotency_key,
        "repository": row.repository,
        "ref": row.ref,
        "old_oid": row.old_oid,
        "new_oid": row.new_oid,
        "state": row.state,
        "code": row.code,
        "observed_oid": row.observed_oid,
        "changed_files": list(row.changed_files()),
        "idempotent": idempotent,
    }
