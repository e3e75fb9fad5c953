"""Decisions of governed writes: register a repository, change its settings, record a proposal,
intend a write and record its outcome.

The write itself is git's (`update-ref <ref> <new> <old>`, run by the shell between two
decisions): `decide_write_intent` checks everything the ledger knows (the task verified, the
proposal's facts, the result's agreement with them, the writer lease and its generation) and
takes the lease in the same plan as the sealed `GOVERNED_WRITE_INTENDED` event; the shell then
swaps the ref, reads it, and `decide_write_outcome` records what the ref says: APPLIED,
NOT_APPLIED or MOVED_BY_OTHER, never a guess. A crash between the two leaves the write
INTENDED and its lease held, and the same decision, fed the ref as read later, reconciles it.
"""

from __future__ import annotations

import attrs
from aios_ledger.core.actors import Actor
from aios_ledger.core.digests import canonical_json
from aios_ledger.core.envelopes import GovernedExecutionBinding
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.git.answers import (
    ProposalAnswer,
    RepositoryAnswer,
    RepositorySettingsAnswer,
    ScanChargeAnswer,
    WriteAnswer,
    proposal_answer,
    repository_answer,
    scan_charge_answer,
    write_answer,
)
from aios_ledger.core.git.policy import (
    branch_ref,
    proposal_facts,
    protected_patterns,
    refuse_by_facts,
    require_agreement,
    zero_oid,
)
from aios_ledger.core.git.records import (
    GovernedWriteRow,
    ProposalRow,
    RepositoryRow,
    RepositorySettingsChangeRow,
    ScanChargeRow,
    WriterLeaseRow,
    lease_id_of,
)
from aios_ledger.core.git.requests import (
    ProposalRecord,
    RegisterRepositoryRequest,
    RepositorySettingsRequest,
    ScanCharge,
    WriteOutcome,
    WriteRequest,
)
from aios_ledger.core.git.settings import DEFAULT_SETTINGS, SettingsChange
from aios_ledger.core.jsonvalue import JsonObject, JsonValue
from aios_ledger.core.log.idempotency import IdempotencyRow
from aios_ledger.core.log.plan import Decision, Replay, request_digest, sealed_plan
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.statements import SqlWrite, Statement
from aios_ledger.core.tasks.records import TaskRow
from aios_ledger.core.tasks.refusals import (
    GOVERNED_WRITE_REFUSED,
    RefusalAnswer,
    RefusalState,
    RefusedAttempt,
    decide_refusal,
    replay_refusal,
)
from aios_ledger.core.tasks.requests import lease_token_sha256
from aios_ledger.core.tasks.results import task_envelope
from aios_ledger.core.tasks.transitions import TaskStatus
from aios_ledger.core.timestamps import Timestamp, require_timestamp

REPOSITORY_REGISTERED = "REPOSITORY_REGISTERED"
REPOSITORY_SETTINGS_CHANGED = "REPOSITORY_SETTINGS_CHANGED"
PROPOSAL_RECORDED = "PROPOSAL_RECORDED"
PROPOSAL_SCAN_CHARGED = "PROPOSAL_SCAN_CHARGED"
GOVERNED_WRITE_INTENDED = "GOVERNED_WRITE_INTENDED"
GOVERNED_WRITE_APPLIED = "GOVERNED_WRITE_APPLIED"
GOVERNED_WRITE_NOT_APPLIED = "GOVERNED_WRITE_NOT_APPLIED"
GOVERNED_WRITE_MOVED_BY_OTHER = "GOVERNED_WRITE_MOVED_BY_OTHER"

INTENDED = "INTENDED"
APPLIED = "APPLIED"
NOT_APPLIED = "NOT_APPLIED"
MOVED_BY_OTHER = "MOVED_BY_OTHER"
OUTCOME_EVENTS = {
    APPLIED: GOVERNED_WRITE_APPLIED,
    NOT_APPLIED: GOVERNED_WRITE_NOT_APPLIED,
    MOVED_BY_OTHER: GOVERNED_WRITE_MOVED_BY_OTHER,
}


# ---------------------------------------------------------------------------------------------
# repositories


@attrs.frozen
class RepositoryState:
    """The repository already registered under the request's name (None: none), and the log's
    tail at the ledger chain."""

    prior: RepositoryRow | None
    tail: LogTail


def decide_register_repository(
    state: RepositoryState,
    request: RegisterRepositoryRequest,
    *,
    now: Timestamp,
    actor: Actor,
    head_branch: str | None,
) -> Decision[RepositoryAnswer]:
    """Register a bare repository under the name bindings use, with its protected patterns
    (`head_branch` is its HEAD branch as the shell read it) and its settings (each one the
    request does not give: its default). The same registration again (the same path, HEAD
    branch and patterns, however they were asked for, and settings it gives that the
    repository has now) is a replay; another under a taken name is `REPOSITORY_CONFLICT`
    (settings change with `decide_change_repository_settings`)."""
    require_timestamp(now)
    patterns = protected_patterns(
        head_branch, request.protected, default_protection=request.default_protection
    )
    change = request.settings or SettingsChange()
    settings = change.apply(DEFAULT_SETTINGS)
    row = RepositoryRow(
        name=request.name,
        path=request.path,
        head_branch=head_branch,
        protected_json=canonical_json(list[JsonValue](patterns)),
        revision=1,
        created_at=now.text,
        updated_at=now.text,
    ).with_settings(settings)
    prior = state.prior
    if prior is not None:
        same = (prior.path, prior.head_branch, prior.protected_json) == (
            row.path,
            row.head_branch,
            row.protected_json,
        )
        if not same:
            raise LedgerError(
                "REPOSITORY_CONFLICT", f"repository {request.name!r} is registered differently"
            )
        if change.apply(prior.settings()) != prior.settings():
            raise LedgerError(
                "REPOSITORY_CONFLICT",
                f"repository {request.name!r} is registered with other settings: change them"
                " with `repo settings`",
            )
        return Replay(repository_answer(prior, idempotent=True))
    event = EventAppend(
        task_id=None,
        agent_id=None,
        event_type=REPOSITORY_REGISTERED,
        payload={
            "name": row.name,
            "path": row.path,
            "head_branch": row.head_branch,
            "protected": list[JsonValue](patterns),
            "default_protection": request.default_protection,
            "settings": settings.public(),
        },
        created_at=now.text,
        rows=(row.image(),),
        actor=actor,
    )
    insert = SqlWrite(Statement.GOVERNED_REPOSITORY_INSERT, row._asdict())
    return sealed_plan(
        (insert,), (event,), repository_answer(row, idempotent=False), tail=state.tail
    )


@attrs.frozen
class RepositorySettingsState:
    """The repository whose settings change (None: not registered), the change already made
    under the request's idempotency key (None: none), and the log's tail at the ledger chain."""

    repository: RepositoryRow | None
    prior: RepositorySettingsChangeRow | None
    tail: LogTail


SETTINGS_OPERATION = "repository_settings"


def _settings_answer(change: RepositorySettingsChangeRow) -> RepositorySettingsAnswer:
    """The answer a change recorded, given again."""
    stored = change.response()
    settings, changed, revision = (
        stored.get("settings"),
        stored.get("changed"),
        stored.get("revision"),
    )
    if (
        not isinstance(settings, dict)
        or not isinstance(changed, list)
        or not all(isinstance(name, str) for name in changed)
        or not isinstance(revision, int)
    ):
        raise LedgerError(
            "GIT_ROW_CORRUPT",
            f"repository_settings_changes {change.idempotency_key}: response_json",
        )
    return {
        "name": change.repository,
        "idempotency_key": change.idempotency_key,
        "revision": revision,
        "settings": settings,
        "changed": [str(name) for name in changed],
        "idempotent": True,
    }


def decide_change_repository_settings(
    state: RepositorySettingsState,
    request: RepositorySettingsRequest,
    *,
    now: Timestamp,
    actor: Actor,
) -> Decision[RepositorySettingsAnswer]:
    """Change a registered repository's settings (those the request gives), as its owner:
    one compare-and-swap of its row on its revision (and on `expected_revision`, when given:
    `REVISION_CONFLICT` if the repository moved on), the change recorded under its key, one
    sealed `REPOSITORY_SETTINGS_CHANGED` carrying the settings after it (the baseline by its
    sha256) and which ones it changed. The same key with the same request is a replay (before
    any other check); with another, `IDEMPOTENCY_CONFLICT`."""
    require_timestamp(now)
    digest = request_digest(SETTINGS_OPERATION, request.name, request.public())
    prior = state.prior
    if prior is not None:
        if prior.repository != request.name or prior.request_sha256 != digest:
            raise LedgerError(
                "IDEMPOTENCY_CONFLICT",
                f"key {request.idempotency_key!r} changed the settings of {prior.repository!r}"
                " with another request",
            )
        return Replay(_settings_answer(prior))
    repository = _require_repository(request.name, state.repository)
    if request.expected_revision is not None and request.expected_revision != repository.revision:
        raise LedgerError(
            "REVISION_CONFLICT",
            f"repository {request.name!r} is at revision {repository.revision}, not"
            f" {request.expected_revision}",
        )
    current = repository.settings()
    settings = request.settings.apply(current)
    after = repository.with_settings(settings)._replace(
        revision=repository.revision + 1, updated_at=now.text
    )
    changed = settings.changed_from(current)
    answer: RepositorySettingsAnswer = {
        "name": after.name,
        "idempotency_key": request.idempotency_key,
        "revision": after.revision,
        "settings": settings.public(),
        "changed": changed,
        "idempotent": False,
    }
    stored = {key: value for key, value in answer.items() if key != "idempotent"}
    change = RepositorySettingsChangeRow(
        idempotency_key=request.idempotency_key,
        repository=after.name,
        request_sha256=digest,
        revision=after.revision,
        response_json=canonical_json(stored),
        created_at=now.text,
    )
    update = SqlWrite(
        Statement.GOVERNED_REPOSITORY_SETTINGS_CAS_UPDATE,
        {
            "name": repository.name,
            "expected_revision": repository.revision,
            **settings.columns(),
            "updated_at": now.text,
        },
    )
    insert = SqlWrite(Statement.REPOSITORY_SETTINGS_CHANGE_INSERT, change._asdict())
    event = EventAppend(
        task_id=None,
        agent_id=None,
        event_type=REPOSITORY_SETTINGS_CHANGED,
        payload={
            "name": after.name,
            "idempotency_key": request.idempotency_key,
            "revision": after.revision,
            "settings": settings.public(),
            "changed": list[JsonValue](changed),
        },
        created_at=now.text,
        rows=(after.image(), change.image()),
        actor=actor,
    )
    return sealed_plan((update, insert), (event,), answer, tail=state.tail)


# ---------------------------------------------------------------------------------------------
# the binding a task runs on


def task_binding(task: TaskRow) -> GovernedExecutionBinding:
    """The binding of the task's execution envelope; a task without one is `TASK_NOT_BOUND`."""
    envelope = task_envelope(task)
    if envelope is None:
        raise LedgerError("TASK_NOT_BOUND", f"task {task.task_id!r} has no governed binding")
    return GovernedExecutionBinding.from_mapping(envelope["binding"])


def _require_task(task_id: str, task: TaskRow | None) -> TaskRow:
    if task is None:
        raise LedgerError("TASK_NOT_FOUND", f"no task {task_id!r}")
    return task


def _require_repository(name: str, repository: RepositoryRow | None) -> RepositoryRow:
    if repository is None or repository.name != name:
        raise LedgerError("REPOSITORY_NOT_FOUND", f"no governed repository {name!r}")
    return repository


def proposal_id_of(task_id: str, attempt: int) -> str:
    """A proposal's key: its task and the attempt that made it."""
    return f"{task_id}#{attempt}"


def attempt_of_proposal(proposal_id: str) -> int:
    """The attempt that made a proposal, from its key (`proposal_id_of`)."""
    return int(proposal_id.rpartition("#")[2])


# ---------------------------------------------------------------------------------------------
# proposals


@attrs.frozen
class ProposalState:
    """The task, the repository its binding names, the proposal already recorded for the task's
    current attempt, and the log's tail at the task's chain."""

    task: TaskRow | None
    repository: RepositoryRow | None
    prior: ProposalRow | None
    tail: LogTail


def _check_lease(task: TaskRow, token: str, now: Timestamp) -> None:
    if (
        task.status != TaskStatus.CLAIMED
        or task.lease_token_hash is None
        or task.lease_token_hash != lease_token_sha256(token)
    ):
        raise LedgerError(
            "LEASE_INVALID", f"the token does not hold the current lease of task {task.task_id!r}"
        )
    expires = task.lease_expires_at
    if expires is None or Timestamp.parse(expires, field="lease").epoch_ms <= now.epoch_ms:
        raise LedgerError("LEASE_EXPIRED", f"the lease of task {task.task_id!r} expired")


@attrs.frozen
class WorkspaceGrant:
    """What a remote worker may read to make a claim's workspace: the binding (its base) and
    the governed repository it names."""

    binding: GovernedExecutionBinding
    repository: RepositoryRow


def grant_workspace(
    task_id: str,
    task: TaskRow | None,
    repository: RepositoryRow | None,
    *,
    agent_id: str,
    lease_token: str,
    now: Timestamp,
) -> WorkspaceGrant:
    """May `agent_id` read the base of the task's binding (`GET /v1/tasks/{task_id}/workspace`)?
    Only the agent holding the task (`NOT_TASK_HOLDER`: another agent's, or nobody's), under
    the attempt's live lease (`LEASE_INVALID`, `LEASE_EXPIRED`), for a task bound
    (`TASK_NOT_BOUND`) to a registered repository (`REPOSITORY_NOT_FOUND`). `repository` is
    the row registered under the binding's repository name, as the shell read it."""
    require_timestamp(now)
    found = _require_task(task_id, task)
    if found.claimed_by != agent_id:
        raise LedgerError("NOT_TASK_HOLDER", f"task {task_id!r} is not held by {agent_id!r}")
    _check_lease(found, lease_token, now)
    binding = task_binding(found)
    return WorkspaceGrant(binding, _require_repository(binding.repository, repository))


def admit_proposal(
    task_id: str,
    task: TaskRow | None,
    prior: ProposalRow | None,
    *,
    lease_token: str,
    now: Timestamp,
    agent_id: str | None = None,
) -> TaskRow:
    """May a proposal for the task's current attempt be read at all? The cheap checks, made
    before the bundle is decoded, stored or scanned (a scan costs seconds, these a read):
    the task exists (`TASK_NOT_FOUND`), no agent but `agent_id` (the caller's token, when it
    has one) holds it (`NOT_TASK_HOLDER`), and `lease_token` is the attempt's live lease
    (`LEASE_INVALID`, `LEASE_EXPIRED`; a task nobody holds has none). An attempt that proposed
    already is admitted to the agent that proposed it: the same bundle again is a replay,
    another is `PROPOSAL_CONFLICT`, which `decide_record_proposal` tells apart by the bundle's
    digest (and checks the lease again in the write). `prior`: the proposal recorded for the
    task's current attempt. Answers the task."""
    require_timestamp(now)
    found = _require_task(task_id, task)
    if agent_id is not None and found.claimed_by not in (None, agent_id):
        raise LedgerError("NOT_TASK_HOLDER", f"task {task_id!r} is held by another agent")
    if prior is None or (agent_id is not None and prior.agent_id != agent_id):
        _check_lease(found, lease_token, now)
    return found


def proposal_replay(
    task: TaskRow, prior: ProposalRow | None, bundle_sha256: str
) -> ProposalAnswer | None:
    """What a proposal is answered without a scan when the task's current attempt proposed
    already (`prior`): the recorded answer again for the same bundle (by its sha256),
    `PROPOSAL_CONFLICT` for another; None when the attempt has not proposed."""
    if prior is None:
        return None
    if prior.bundle_sha256 != bundle_sha256:
        raise LedgerError(
            "PROPOSAL_CONFLICT",
            f"attempt {task.attempt} of task {task.task_id!r} proposed another bundle already",
        )
    return proposal_answer(prior, idempotent=True)


def decide_record_proposal(
    state: ProposalState, request: ProposalRecord, *, now: Timestamp, actor: Actor
) -> Decision[ProposalAnswer]:
    """Record what an attempt's agent proposed, under the attempt's lease, with the facts the
    ledger computes from it. The same bundle again is a replay; another one for the same
    attempt is `PROPOSAL_CONFLICT`."""
    require_timestamp(now)
    task = _require_task(request.task_id, state.task)
    replayed = proposal_replay(task, state.prior, request.bundle_sha256)
    if replayed is not None:
        return Replay(replayed)
    _check_lease(task, request.lease_token, now)
    binding = task_binding(task)
    repository = _require_repository(binding.repository, state.repository)
    if request.base_oid != binding.base_oid:
        raise LedgerError("BUNDLE_INVALID", "the proposal is not on the binding's base_oid")
    heads = {ref.name: ref.oid for ref in request.refs}
    if heads.get("HEAD") != request.head_oid:
        raise LedgerError("BUNDLE_INVALID", "the bundle's HEAD is not the proposal's head")
    target = branch_ref(binding.target_branch)
    facts = proposal_facts(
        refs=sorted(heads),
        target_ref=target,
        descends_from_base=request.descends_from_base,
        secrets=[
            {"path": found.path, "kind": found.kind, "line": found.line}
            for found in request.secrets
        ],
        secrets_baseline_sha256=request.secrets_baseline_sha256,
        protected=repository.protected(),
        head_branch=repository.head_branch,
    )
    changed = sorted(set(request.changed_files))
    row = ProposalRow(
        proposal_id=proposal_id_of(task.task_id, task.attempt),
        task_id=task.task_id,
        attempt=task.attempt,
        repository=repository.name,
        agent_id=task.claimed_by,
        base_oid=request.base_oid,
        head_oid=request.head_oid,
        bundle_sha256=request.bundle_sha256,
        bundle_bytes=request.bundle_bytes,
        refs_json=canonical_json({name: heads[name] for name in sorted(heads)}),
        changed_files_json=canonical_json(list[JsonValue](changed)),
        facts_json=canonical_json(facts),
        created_at=now.text,
        scan_bytes=request.scan_bytes,
        scan_seconds=request.scan_seconds,
    )
    event = EventAppend(
        task_id=task.task_id,
        agent_id=task.claimed_by,
        event_type=PROPOSAL_RECORDED,
        payload={
            "proposal_id": row.proposal_id,
            "attempt": row.attempt,
            "repository": row.repository,
            "base_oid": row.base_oid,
            "head_oid": row.head_oid,
            "bundle_sha256": row.bundle_sha256,
            "changed_files": list[JsonValue](changed),
            "facts": facts,
            "scan": {"bytes": request.scan_bytes, "seconds": request.scan_seconds},
        },
        created_at=now.text,
        rows=(row.image(),),
        actor=actor,
    )
    insert = SqlWrite(Statement.TASK_PROPOSAL_INSERT, row._asdict())
    return sealed_plan((insert,), (event,), proposal_answer(row, idempotent=False), tail=state.tail)


@attrs.frozen
class ScanChargeState:
    """The task whose proposal's scan was refused, the repository its binding names, how many
    refused scans its attempt was charged already, and the log's tail at the task's chain."""

    task: TaskRow | None
    repository: RepositoryRow | None
    charged: int
    tail: LogTail


def decide_charge_scan(
    state: ScanChargeState, request: ScanCharge, *, now: Timestamp, actor: Actor
) -> Decision[ScanChargeAnswer]:
    """Charge what a refused scan cost to the agent whose proposal it was: no proposal is
    recorded (the refusal stands), but the scanning happened, and its agent's window counts it
    beside its recorded proposals (`admit_scan`), so that proposals that overrun their budget
    cannot be repeated for free. Its row and a sealed `PROPOSAL_SCAN_CHARGED` event, on the
    task's chain. Not keyed: every refused scan is charged, as every one cost its seconds."""
    require_timestamp(now)
    task = _require_task(request.task_id, state.task)
    repository = _require_repository(task_binding(task).repository, state.repository)
    row = ScanChargeRow(
        charge_id=f"{task.task_id}#{request.attempt}#{state.charged + 1}",
        repository=repository.name,
        agent_id=request.agent_id,
        task_id=task.task_id,
        attempt=request.attempt,
        bundle_sha256=request.bundle_sha256,
        code=request.code,
        scan_bytes=request.scan_bytes,
        scan_seconds=request.scan_seconds,
        created_at=now.text,
    )
    event = EventAppend(
        task_id=task.task_id,
        agent_id=request.agent_id,
        event_type=PROPOSAL_SCAN_CHARGED,
        payload={
            "charge_id": row.charge_id,
            "attempt": row.attempt,
            "repository": row.repository,
            "bundle_sha256": row.bundle_sha256,
            "code": row.code,
            "scan": {"bytes": row.scan_bytes, "seconds": row.scan_seconds},
        },
        created_at=now.text,
        rows=(row.image(),),
        actor=actor,
    )
    insert = SqlWrite(Statement.AGENT_SCAN_CHARGE_INSERT, row._asdict())
    return sealed_plan((insert,), (event,), scan_charge_answer(row), tail=state.tail)


# ---------------------------------------------------------------------------------------------
# the governed write


@attrs.frozen
class WriteState:
    """What intending a write reads: the task, the repository and proposal of its binding and
    current attempt, the writer lease of the target ref, the write already recorded under the
    request's key, the log's tail at the task's chain, and the refusal kept under the key (its
    recorded answer in the task's idempotency ledger, `refusal_key(WRITE_OPERATION, key)`)."""

    task: TaskRow | None
    repository: RepositoryRow | None
    proposal: ProposalRow | None
    lease: WriterLeaseRow | None
    prior: GovernedWriteRow | None
    tail: LogTail
    refused: IdempotencyRow | None = None


# The operation a refused write's answer is recorded under (`core.tasks.refusals`).
WRITE_OPERATION = "governed_write"
# The checks of a governed write whose refusal is recorded (a sealed GOVERNED_WRITE_REFUSED):
# every check `decide_write_intent` makes of a task that exists, and the target's name as git
# and the repository take it. Not recorded: a request that does not parse, a task that does
# not exist, a key used otherwise (IDEMPOTENCY_CONFLICT, WRITE_IN_DOUBT), and failures of the
# ledger or of git itself (a corrupt row, git not answering), which refuse nothing.
WRITE_REFUSALS = frozenset(
    {
        "TASK_NOT_VERIFIED",
        "TASK_NOT_BOUND",
        "REPOSITORY_NOT_FOUND",
        "PROPOSAL_NOT_FOUND",
        "PROTECTED_REF",
        "NOT_A_DESCENDANT",
        "SECRET_MATERIAL",
        "RESULT_GOVERNANCE_VIOLATION",
        "WRITER_LEASE_HELD",
        "GENERATION_STALE",
        "REF_NAME_INVALID",
    }
)


def write_request_digest(request: WriteRequest) -> str:
    return request_digest(WRITE_OPERATION, request.task_id, request.public())


def _lease_write(
    lease: WriterLeaseRow | None,
    repository: str,
    ref: str,
    holder: str | None,
    generation: int,
    now: Timestamp,
) -> tuple[SqlWrite, WriterLeaseRow]:
    if lease is None:
        row = WriterLeaseRow(
            lease_id_of(repository, ref), repository, ref, holder, generation, 1, now.text
        )
        return SqlWrite(Statement.WRITER_LEASE_INSERT, row._asdict()), row
    row = lease._replace(
        holder=holder, generation=generation, revision=lease.revision + 1, updated_at=now.text
    )
    write = SqlWrite(
        Statement.WRITER_LEASE_CAS_UPDATE,
        {
            "lease_id": lease.lease_id,
            "expected_revision": lease.revision,
            "holder": holder,
            "generation": generation,
            "updated_at": now.text,
        },
    )
    return write, row


def _replay_write(prior: GovernedWriteRow, task_id: str) -> Replay[WriteAnswer]:
    if prior.task_id != task_id:
        raise LedgerError(
            "IDEMPOTENCY_CONFLICT",
            f"key {prior.idempotency_key!r} was first used for task {prior.task_id!r}",
        )
    if prior.state == INTENDED:
        raise LedgerError(
            "WRITE_IN_DOUBT",
            f"write {prior.idempotency_key!r} was intended and its outcome is not recorded: "
            "read the ref and record it",
        )
    return Replay(write_answer(prior, idempotent=True))


def governed_writable(status: str) -> bool:
    """Whether a task of `status` may have its proposal written: only a verified success."""
    return status == TaskStatus.SUCCEEDED


def decide_write_intent(
    state: WriteState, request: WriteRequest, *, now: Timestamp, actor: Actor
) -> Decision[WriteAnswer]:
    """Intend to move the binding's target to the proposal's head: every check the ledger can
    make, the writer lease taken, the sealed `GOVERNED_WRITE_INTENDED` event."""
    require_timestamp(now)
    if state.prior is not None:
        return _replay_write(state.prior, request.task_id)
    replay_refusal(state.refused, write_request_digest(request))
    task = _require_task(request.task_id, state.task)
    if not governed_writable(task.status):
        raise LedgerError(
            "TASK_NOT_VERIFIED", f"task {task.task_id!r} is {task.status}, not verified SUCCEEDED"
        )
    binding = task_binding(task)
    repository = _require_repository(binding.repository, state.repository)
    proposal = state.proposal
    if proposal is None or proposal.task_id != task.task_id or proposal.attempt != task.attempt:
        raise LedgerError(
            "PROPOSAL_NOT_FOUND",
            f"attempt {task.attempt} of task {task.task_id!r} proposed nothing",
        )
    ref = branch_ref(binding.target_branch)
    facts = proposal.facts()
    refuse_by_facts(facts)
    result = task.result()
    if isinstance(result, dict):
        require_agreement(result, facts, proposal.changed_files(), proposal.head_oid)
    lease = state.lease
    if lease is not None and (lease.repository, lease.ref) != (repository.name, ref):
        raise ValueError("the writer lease read is not the target's")
    if lease is not None and lease.holder is not None:
        raise LedgerError(
            "WRITER_LEASE_HELD", f"{ref} of {repository.name} is being written by {lease.holder!r}"
        )
    if lease is not None and binding.generation < lease.generation:
        raise LedgerError(
            "GENERATION_STALE",
            f"generation {binding.generation} is below {lease.generation}, the last one "
            f"applied to {ref}",
        )
    old = (
        zero_oid(binding.base_oid)
        if binding.branch_mode == "CREATE_NEW"
        else binding.expected_branch_oid
    )
    lease_write, lease_after = _lease_write(
        lease,
        repository.name,
        ref,
        request.idempotency_key,
        0 if lease is None else lease.generation,
        now,
    )
    row = GovernedWriteRow(
        idempotency_key=request.idempotency_key,
        task_id=task.task_id,
        proposal_id=proposal.proposal_id,
        repository=repository.name,
        ref=ref,
        old_oid=old,
        new_oid=proposal.head_oid,
        generation=binding.generation,
        state=INTENDED,
        code=None,
        observed_oid=None,
        changed_files_json=proposal.changed_files_json,
        revision=1,
        created_at=now.text,
        updated_at=now.text,
    )
    event = EventAppend(
        task_id=task.task_id,
        agent_id=None,
        event_type=GOVERNED_WRITE_INTENDED,
        payload={
            "idempotency_key": row.idempotency_key,
            "proposal_id": row.proposal_id,
            "repository": row.repository,
            "ref": ref,
            "old_oid": old,
            "new_oid": row.new_oid,
            "generation": row.generation,
            "branch_mode": binding.branch_mode,
        },
        created_at=now.text,
        rows=(lease_after.image(), row.image()),
        actor=actor,
    )
    insert = SqlWrite(Statement.GOVERNED_WRITE_INSERT, row._asdict())
    return sealed_plan(
        (lease_write, insert), (event,), write_answer(row, idempotent=False), tail=state.tail
    )


def _attempted_write(state: WriteState) -> JsonObject:
    """What a refused write attempted, as far as the ledger can say: the repository, branch
    and ref of the task's binding and its generation, and the proposal of its current attempt
    (None where the task has none)."""
    attempted: JsonObject = {
        "repository": None,
        "branch": None,
        "ref": None,
        "generation": None,
        "proposal_id": None,
        "head_oid": None,
    }
    task = state.task
    if task is None:
        return attempted
    try:
        binding = task_binding(task)
    except LedgerError:  # not bound, or a binding that does not parse: nothing to name
        binding = None
    if binding is not None:
        attempted.update(
            repository=binding.repository,
            branch=binding.target_branch,
            ref=branch_ref(binding.target_branch),
            generation=binding.generation,
        )
    proposal = state.proposal
    if proposal is not None and (proposal.task_id, proposal.attempt) == (
        task.task_id,
        task.attempt,
    ):
        attempted.update(proposal_id=proposal.proposal_id, head_oid=proposal.head_oid)
    return attempted


def decide_write_refusal(
    state: WriteState, request: WriteRequest, refused: LedgerError, *, now: Timestamp, actor: Actor
) -> Decision[RefusalAnswer] | None:
    """Record a governed write refused by one of its checks (`WRITE_REFUSALS`), read again in
    the recording's own transaction: a sealed GOVERNED_WRITE_REFUSED on the task's chain naming
    the code, the message, the repository, ref and proposal, and the key; the writer lease is
    never taken. None (nothing recorded) for another code, a task that does not exist, or a
    key that holds a write; the same refusal again replays."""
    if refused.code not in WRITE_REFUSALS:
        return None
    attempt = RefusedAttempt(
        operation=WRITE_OPERATION,
        event_type=GOVERNED_WRITE_REFUSED,
        task_id=request.task_id,
        idempotency_key=request.idempotency_key,
        request_sha256=write_request_digest(request),
        code=refused.code,
        message=refused.detail,
        attempted=_attempted_write(state),
    )
    recorded = RefusalState(
        task=state.task, prior=state.refused, answered=state.prior is not None, tail=state.tail
    )
    return decide_refusal(recorded, attempt, now=now, actor=actor)


@attrs.frozen
class OutcomeState:
    """The write whose outcome is recorded, its target's writer lease, and the log's tail at
    its task's chain."""

    write: GovernedWriteRow | None
    lease: WriterLeaseRow | None
    tail: LogTail


def outcome_of(
    write: GovernedWriteRow,
    observed: str | None,
    swapped: bool,
    recovered: bool,
    refused_code: str | None = None,
) -> tuple[str, str | None]:
    """What became of an intended write: its state and, when the ref holds something else,
    why it could not be moved. `observed` is the ref as read (None: it does not exist).

    Right after the swap, git's answer decides: it moved the ref (APPLIED), or it refused, and
    the ref says why (at the old id still: NOT_APPLIED, with the remote's `refused_code`;
    elsewhere, even at the same commit: moved by someone else). After a crash only the ref is
    left to read: at the new id the swap happened (APPLIED), at the old one it did not,
    anywhere else someone else moved it."""
    absent = write.old_oid == zero_oid(write.old_oid)
    if swapped or (recovered and observed == write.new_oid):
        return APPLIED, None
    if observed == (None if absent else write.old_oid):
        return NOT_APPLIED, refused_code
    return MOVED_BY_OTHER, "BRANCH_EXISTS" if absent else "BRANCH_MOVED"


def decide_write_outcome(
    state: OutcomeState, request: WriteOutcome, *, now: Timestamp, actor: Actor
) -> Decision[WriteAnswer]:
    """Record what became of an intended write, from the ref as read, and free its lease; an
    applied write raises the lease's generation to its own. A write already settled replays."""
    require_timestamp(now)
    write = state.write
    if write is None or write.idempotency_key != request.idempotency_key:
        raise LedgerError("WRITE_NOT_FOUND", f"no governed write {request.idempotency_key!r}")
    if write.state != INTENDED:
        return Replay(write_answer(write, idempotent=True))
    if request.swapped and request.observed_oid != write.new_oid:
        raise LedgerError("FIELDS_INVALID", "a swapped ref holds the new object id")
    outcome, code = outcome_of(
        write, request.observed_oid, request.swapped, request.recovered, request.refused_code
    )
    lease = state.lease
    if lease is None or lease.lease_id != lease_id_of(write.repository, write.ref):
        raise LedgerError("WRITER_LEASE_MISSING", f"no writer lease of {write.ref}")
    if lease.holder != write.idempotency_key:
        raise LedgerError(
            "WRITER_LEASE_HELD", f"{write.ref} is held by {lease.holder!r}, not this write"
        )
    generation = max(lease.generation, write.generation) if outcome == APPLIED else lease.generation
    lease_write, lease_after = _lease_write(
        lease, write.repository, write.ref, None, generation, now
    )
    after = write._replace(
        state=outcome,
        code=code,
        observed_oid=request.observed_oid,
        revision=write.revision + 1,
        updated_at=now.text,
    )
    update = SqlWrite(
        Statement.GOVERNED_WRITE_CAS_UPDATE,
        {
            "idempotency_key": write.idempotency_key,
            "expected_revision": write.revision,
            "state": outcome,
            "code": code,
            "observed_oid": request.observed_oid,
            "updated_at": now.text,
        },
    )
    payload: JsonObject = {
        "idempotency_key": write.idempotency_key,
        "repository": write.repository,
        "ref": write.ref,
        "old_oid": write.old_oid,
        "new_oid": write.new_oid,
        "observed_oid": request.observed_oid,
        "state": outcome,
        "code": code,
        "recovered": request.recovered,
        "generation": write.generation,
        "changed_files": list[JsonValue](write.changed_files()),
    }
    event = EventAppend(
        task_id=write.task_id,
        agent_id=None,
        event_type=OUTCOME_EVENTS[outcome],
        payload=payload,
        created_at=now.text,
        rows=(lease_after.image(), after.image()),
        actor=actor,
    )
    return sealed_plan(
        (lease_write, update), (event,), write_answer(after, idempotent=False), tail=state.tail
    )
