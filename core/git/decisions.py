"""Decisions of governed writes: git swaps the ref between the sealed intent, which takes the writer
lease, and the outcome read from the ref, which also reconciles a crash."""

from __future__ import annotations

import contextlib
from typing import cast

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
from aios_ledger.core.statements import SqlWrite, Statement, guarded_update
from aios_ledger.core.tasks.records import TaskRow, require_task
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


# --- repositories ---------------------------------------------------------------------------------


def require_url_without_credential(url: str) -> None:
    """A remote's URL as the ledger keeps it: no password or token in its userinfo (an ssh
    URL's user name is an account, not a secret)."""
    scheme, _, rest = url.partition("://")
    userinfo = rest.split("/", 1)[0].rpartition("@")[0] if rest else ""
    if ":" in userinfo or (userinfo and scheme.lower() != "ssh"):
        raise LedgerError(
            "REMOTE_URL_INVALID", "a remote's URL is kept without any credential in it"
        )


@attrs.frozen
class RepositoryState:
    """The repository already registered under the name (None: none), and the tail."""

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
    """Register a bare repository under the name bindings use; the same again replays."""
    require_timestamp(now)
    if request.remote_url is not None:
        require_url_without_credential(request.remote_url)
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
        remote_url=request.remote_url,
    ).with_settings(settings)
    prior = state.prior
    if prior is not None:
        registered = (row.path, row.head_branch, row.protected_json, row.remote_url)
        if (prior.path, prior.head_branch, prior.protected_json, prior.remote_url) != registered:
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
            # Where a remote repository's writes go, sealed beside its row (none: in place).
            **({} if row.remote_url is None else {"remote_url": row.remote_url}),
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
    """The repository, the change already made under the key, and the log's tail."""

    repository: RepositoryRow | None
    prior: RepositorySettingsChangeRow | None
    tail: LogTail


SETTINGS_OPERATION = "repository_settings"


def _settings_answer(change: RepositorySettingsChangeRow) -> RepositorySettingsAnswer:
    stored = change.response()
    changed = stored.get("changed")
    if (
        not isinstance(stored.get("settings"), dict)
        or not isinstance(changed, list)
        or not all(isinstance(name, str) for name in changed)
        or not isinstance(stored.get("revision"), int)
    ):
        raise LedgerError(
            "GIT_ROW_CORRUPT",
            f"repository_settings_changes {change.idempotency_key}: response_json",
        )
    answer = {**stored, "name": change.repository, "idempotency_key": change.idempotency_key}
    return cast(RepositorySettingsAnswer, {**answer, "idempotent": True})


def decide_change_repository_settings(
    state: RepositorySettingsState,
    request: RepositorySettingsRequest,
    *,
    now: Timestamp,
    actor: Actor,
) -> Decision[RepositorySettingsAnswer]:
    """Change a repository's settings: a CAS on its revision, recorded under its key."""
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
    # The change as its key records it and its event seals it; the answer adds `idempotent`.
    recorded: JsonObject = {
        "name": after.name,
        "idempotency_key": request.idempotency_key,
        "revision": after.revision,
        "settings": settings.public(),
        "changed": list[JsonValue](changed),
    }
    answer = cast(RepositorySettingsAnswer, {**recorded, "idempotent": False})
    change = RepositorySettingsChangeRow(
        idempotency_key=request.idempotency_key,
        repository=after.name,
        request_sha256=digest,
        revision=after.revision,
        response_json=canonical_json(recorded),
        created_at=now.text,
    )
    update = guarded_update(
        Statement.GOVERNED_REPOSITORY_SETTINGS_CAS_UPDATE, after, repository.revision
    )
    insert = SqlWrite(Statement.REPOSITORY_SETTINGS_CHANGE_INSERT, change._asdict())
    event = EventAppend(
        task_id=None,
        agent_id=None,
        event_type=REPOSITORY_SETTINGS_CHANGED,
        payload=recorded,
        created_at=now.text,
        rows=(after.image(), change.image()),
        actor=actor,
    )
    return sealed_plan((update, insert), (event,), answer, tail=state.tail)


# --- the binding a task runs on -------------------------------------------------------------------


def task_binding(task: TaskRow) -> GovernedExecutionBinding:
    """The binding of the task's execution envelope; a task without one is `TASK_NOT_BOUND`."""
    envelope = task_envelope(task)
    if envelope is None:
        raise LedgerError("TASK_NOT_BOUND", f"task {task.task_id!r} has no governed binding")
    return GovernedExecutionBinding.from_mapping(envelope["binding"])


def _require_repository(name: str, repository: RepositoryRow | None) -> RepositoryRow:
    if repository is None or repository.name != name:
        raise LedgerError("REPOSITORY_NOT_FOUND", f"no governed repository {name!r}")
    return repository


def proposal_id_of(task_id: str, attempt: int) -> str:
    return f"{task_id}#{attempt}"


def attempt_of_proposal(proposal_id: str) -> int:
    return int(proposal_id.rpartition("#")[2])


# --- proposals ------------------------------------------------------------------------------------


@attrs.frozen
class ProposalState:
    """The task, its repository, the current attempt's proposal, and the log's tail."""

    task: TaskRow | None
    repository: RepositoryRow | None
    prior: ProposalRow | None
    tail: LogTail


def _check_lease(task: TaskRow, token: str, now: Timestamp) -> None:
    if task.status != TaskStatus.CLAIMED or task.lease_token_hash != lease_token_sha256(token):
        raise LedgerError(
            "LEASE_INVALID", f"the token does not hold the current lease of task {task.task_id!r}"
        )
    expires = task.lease_expires_at
    if expires is None or Timestamp.parse(expires, field="lease").epoch_ms <= now.epoch_ms:
        raise LedgerError("LEASE_EXPIRED", f"the lease of task {task.task_id!r} expired")


@attrs.frozen
class WorkspaceGrant:
    """What a remote worker may read to make a claim's workspace."""

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
    """Whether `agent_id` may read the base of the task's binding: only its live holder."""
    require_timestamp(now)
    found = require_task(task_id, task)
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
    """The cheap checks before a bundle is scanned, which costs seconds."""
    require_timestamp(now)
    found = require_task(task_id, task)
    if agent_id is not None and found.claimed_by not in (None, agent_id):
        raise LedgerError("NOT_TASK_HOLDER", f"task {task_id!r} is held by another agent")
    if prior is None or (agent_id is not None and prior.agent_id != agent_id):
        _check_lease(found, lease_token, now)
    return found


def proposal_replay(
    task: TaskRow, prior: ProposalRow | None, bundle_sha256: str
) -> ProposalAnswer | None:
    """The answer again for the same bundle, `PROPOSAL_CONFLICT` for another, without a scan."""
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
    """Record an attempt's proposal, under its lease, with the facts computed from it."""
    require_timestamp(now)
    task = require_task(request.task_id, state.task)
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
        secrets=[attrs.asdict(found) for found in request.secrets],
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
    """The task whose scan was refused, its repository, its charges, and the log's tail."""

    task: TaskRow | None
    repository: RepositoryRow | None
    charged: int
    tail: LogTail


def decide_charge_scan(
    state: ScanChargeState, request: ScanCharge, *, now: Timestamp, actor: Actor
) -> Decision[ScanChargeAnswer]:
    """Charge a refused scan to its agent's window, so that overruns are not free."""
    require_timestamp(now)
    task = require_task(request.task_id, state.task)
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


# --- the governed write ---------------------------------------------------------------------------


@attrs.frozen
class WriteState:
    """What intending a write reads, including the write and refusal kept under its key."""

    task: TaskRow | None
    repository: RepositoryRow | None
    proposal: ProposalRow | None
    lease: WriterLeaseRow | None
    prior: GovernedWriteRow | None
    tail: LogTail
    refused: IdempotencyRow | None = None


# The operation a refused write's answer is recorded under (`core.tasks.refusals`).
WRITE_OPERATION = "governed_write"
# The checks whose refusal is recorded (a sealed GOVERNED_WRITE_REFUSED); a request that does not
# parse, a missing task, a reused key and failures of the ledger or git leave no trace.
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
    return guarded_update(Statement.WRITER_LEASE_CAS_UPDATE, row, lease.revision), row


def require_key_of_task(prior: GovernedWriteRow, task_id: str) -> None:
    """A write's key answers only the task it was first used for."""
    if prior.task_id != task_id:
        raise LedgerError(
            "IDEMPOTENCY_CONFLICT",
            f"key {prior.idempotency_key!r} was first used for task {prior.task_id!r}",
        )


def _replay_write(prior: GovernedWriteRow, task_id: str) -> Replay[WriteAnswer]:
    require_key_of_task(prior, task_id)
    if prior.state == INTENDED:
        raise LedgerError(
            "WRITE_IN_DOUBT",
            f"write {prior.idempotency_key!r} was intended and its outcome is not recorded: "
            "read the ref and record it",
        )
    return Replay(write_answer(prior, idempotent=True))


def governed_writable(status: str) -> bool:
    return status == TaskStatus.SUCCEEDED


def decide_write_intent(
    state: WriteState, request: WriteRequest, *, now: Timestamp, actor: Actor
) -> Decision[WriteAnswer]:
    """Intend to move the binding's target: every check, the writer lease, the sealed intent."""
    require_timestamp(now)
    if state.prior is not None:
        return _replay_write(state.prior, request.task_id)
    replay_refusal(state.refused, write_request_digest(request))
    task = require_task(request.task_id, state.task)
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
    names = ("repository", "branch", "ref", "generation", "proposal_id", "head_oid")
    attempted: JsonObject = dict.fromkeys(names)
    task = state.task
    if task is None:
        return attempted
    with contextlib.suppress(LedgerError):  # not bound, or a binding that does not parse
        binding = task_binding(task)
        attempted.update(
            repository=binding.repository,
            branch=binding.target_branch,
            ref=branch_ref(binding.target_branch),
            generation=binding.generation,
        )
    proposal = state.proposal
    current = (task.task_id, task.attempt)
    if proposal is not None and (proposal.task_id, proposal.attempt) == current:
        attempted.update(proposal_id=proposal.proposal_id, head_oid=proposal.head_oid)
    return attempted


def decide_write_refusal(
    state: WriteState, request: WriteRequest, refused: LedgerError, *, now: Timestamp, actor: Actor
) -> Decision[RefusalAnswer] | None:
    """Record a write refused by one of `WRITE_REFUSALS`, without taking the lease."""
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
    """The write whose outcome is recorded, its target's writer lease, and the log's tail."""

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
    """What became of an intended write, from the ref as read: git's answer right after the swap
    (a refusal that left the ref at the old id is NOT_APPLIED, with the remote's `refused_code`),
    the ref alone after a crash."""
    absent = write.old_oid == zero_oid(write.old_oid)
    if swapped or (recovered and observed == write.new_oid):
        return APPLIED, None
    if observed == (None if absent else write.old_oid):
        return NOT_APPLIED, refused_code
    return MOVED_BY_OTHER, "BRANCH_EXISTS" if absent else "BRANCH_MOVED"


def decide_write_outcome(
    state: OutcomeState, request: WriteOutcome, *, now: Timestamp, actor: Actor
) -> Decision[WriteAnswer]:
    """Record an intended write's outcome and free its lease."""
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
    update = guarded_update(Statement.GOVERNED_WRITE_CAS_UPDATE, after, write.revision)
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
