"""What the governed-write decisions answer: plain dicts with a checked shape (`TypedDict`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
    return cast(ScanChargeAnswer, _of_row(row._asdict(), ScanChargeAnswer.__annotations__, {}))


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


def _of_row(
    columns: Mapping[str, object], names: Iterable[str], computed: Mapping[str, object]
) -> dict[str, object]:
    """An answer's fields in its order, each from `computed`, else the row's column of its name;
    an optional field found in neither is left out."""
    found = {**columns, **computed}
    return {name: found[name] for name in names if name in found}


def repository_answer(row: RepositoryRow, *, idempotent: bool) -> RepositoryAnswer:
    computed = {
        "protected": list(row.protected()),
        "settings": row.settings().public(),
        "idempotent": idempotent,
    }
    answer = _of_row(row._asdict(), RepositoryAnswer.__annotations__, computed)
    return cast(RepositoryAnswer, answer)


def proposal_answer(row: ProposalRow, *, idempotent: bool) -> ProposalAnswer:
    computed = {
        "changed_files": list(row.changed_files()),
        "facts": row.facts(),
        "idempotent": idempotent,
    }
    return cast(ProposalAnswer, _of_row(row._asdict(), ProposalAnswer.__annotations__, computed))


def write_answer(row: GovernedWriteRow, *, idempotent: bool) -> WriteAnswer:
    computed = {"changed_files": list(row.changed_files()), "idempotent": idempotent}
    return cast(WriteAnswer, _of_row(row._asdict(), WriteAnswer.__annotations__, computed))
