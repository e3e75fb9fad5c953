"""The governed write: `aios-ledger write TASK_ID --json FILE` (`{"idempotency_key": ...}`).

The ledger and the repository cannot commit together, so a write is split into steps after
which a crash can be recovered without guessing:

1. every check the ledger can make is decided without writing, so a refusal changes nothing;
2. the proposal's head is fetched into the repository's quarantine namespace;
3. the intent is committed with a sealed event, taking the writer lease of (repository, ref);
4. git's own compare-and-swap moves the ref (`update-ref`; a remote's: `push --atomic
   --force-with-lease` of the ref and of the notes ref holding its attestation);
5. the outcome (APPLIED, MOVED_BY_OTHER, NOT_APPLIED) is committed and the lease freed;
6. an APPLIED write is attested (a failure leaves it standing), then proposed as a pull
   request where the repository names a forge (`governed.pull_requests`).

A write left INTENDED by a crash is settled by the same write again or by `recover_writes`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from aios_ledger.core import IdempotencyRow, LedgerError, LogTail, TaskRow, chain_of
from aios_ledger.core.actors import Actor
from aios_ledger.core.attest.decisions import NOTES_REF
from aios_ledger.core.git import (
    GovernedWriteRow,
    OutcomeState,
    WriteAnswer,
    WriteOutcome,
    WriteRequest,
    WriterLeaseRow,
    WriteState,
    decide_write_intent,
    decide_write_outcome,
)
from aios_ledger.core.git.decisions import (
    APPLIED,
    INTENDED,
    WRITE_OPERATION,
    WRITE_REFUSALS,
    attempt_of_proposal,
    decide_write_refusal,
    require_key_of_task,
    task_binding,
)
from aios_ledger.core.git.policy import HEADS, branch_ref, zero_oid
from aios_ledger.core.git.records import lease_id_of
from aios_ledger.core.log.plan import Decision, Replay
from aios_ledger.core.refnames import require_unambiguous_branch
from aios_ledger.core.tasks.refusals import refusal_key
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.attest.commits import attest_write, note_to_push
from aios_ledger.shell.attest.keys import SigningKey
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import Database, fetch_all, fetch_record
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.git import remotes
from aios_ledger.shell.git.proposals import ensure_in_repository, proposal_row, quarantine_ref
from aios_ledger.shell.git.remotes import (
    PushAnswer,
    PushedNote,
    fetch_mirror,
    push_notes,
    remote_ref,
)
from aios_ledger.shell.git.repos import get_repository, remote_of_repository, repository_row
from aios_ledger.shell.git.runner import check_ref_format, list_refs, read_ref, run_git
from aios_ledger.shell.governed.pull_requests import propose_write
from aios_ledger.shell.tracing import record_span, write_started

R = TypeVar("R")
LEASE_WAIT_SECONDS = 10.0
LEASE_POLL_SECONDS = 0.05
REFLOG_PREFIX = "aios-ledger governed write "


def write_row(conn: Connection, key: str) -> GovernedWriteRow | None:
    return fetch_record(conn, "get_governed_write", {"idempotency_key": key}, GovernedWriteRow)


def lease_row(conn: Connection, repository: str, ref: str) -> WriterLeaseRow | None:
    return fetch_record(
        conn, "get_writer_lease", {"lease_id": lease_id_of(repository, ref)}, WriterLeaseRow
    )


def _write_state(conn: Connection, plans: PlanExecutor | None, request: WriteRequest) -> WriteState:
    task = fetch_record(conn, "get_task", {"task_id": request.task_id}, TaskRow)
    repository = proposal = lease = None
    if task is not None and task.metadata().get("execution") is not None:
        binding = task_binding(task)
        repository = repository_row(conn, binding.repository)
        proposal = proposal_row(conn, task.task_id, task.attempt)
        lease = lease_row(conn, binding.repository, branch_ref(binding.target_branch))
    chain = chain_of(request.task_id)
    # A dry run (no executor) decides on an empty chain: it only looks for refusals.
    tail = plans.tail(chain) if plans is not None else LogTail.read(0, (chain,), ())
    kept_refusal = {"idempotency_key": refusal_key(WRITE_OPERATION, request.idempotency_key)}
    refused = fetch_record(conn, "task_idempotency_get", kept_refusal, IdempotencyRow)
    return WriteState(
        task=task,
        repository=repository,
        proposal=proposal,
        lease=lease,
        prior=write_row(conn, request.idempotency_key),
        tail=tail,
        refused=refused,
    )


def move_ref(repository_path: str, ref: str, new: str, old: str, key: str) -> bool:
    """git's compare-and-swap of `ref` from `old` to `new`; a module function, so that the crash
    tests' helper process can die on either side of it."""
    update = ["update-ref", "--create-reflog", "-m", REFLOG_PREFIX + key, ref, new, old]
    moved = run_git(["--git-dir", repository_path, *update], check=False)
    return moved.returncode == 0


def _answered(answer: WriteAnswer, why: str = "") -> WriteAnswer:
    """An APPLIED write's answer; any other outcome raises its code (with `why`, the remote's
    message)."""
    if answer["state"] == APPLIED:
        return answer
    detail = (
        f"{answer['ref']} of {answer['repository']} was not moved by write "
        f"{answer['idempotency_key']!r} ({answer['state']}; the ref holds "
        f"{answer['observed_oid'] or 'nothing'})"
    )
    raise LedgerError(answer["code"] or "WRITE_NOT_APPLIED", f"{detail}: {why}" if why else detail)


def _settle(
    db: Database, write: GovernedWriteRow, clock: Clock, pushed: PushAnswer | None = None
) -> WriteAnswer:
    """Record what became of an intended write, from git's answer to the swap just made
    (`pushed`; None: recovered after a crash) and the ref as read (on a remote repository, the
    remote's ref: a remote that cannot be read leaves it intended)."""
    repository = get_repository(db, write.repository)
    remote = remote_of_repository(repository)
    swapped = pushed is not None and pushed.swapped
    if swapped:
        observed: str | None = write.new_oid
    elif remote is not None:
        observed = remote_ref(remote, write.ref)
    else:
        observed = read_ref(repository.path, write.ref)
    outcome = WriteOutcome.from_mapping(
        {
            "idempotency_key": write.idempotency_key,
            "observed_oid": observed,
            "swapped": swapped,
            "recovered": pushed is None,
            "refused_code": None if pushed is None else pushed.code,
        }
    )

    actor = current_actor()

    def record(conn: Connection) -> WriteAnswer:
        plans = PlanExecutor(conn)
        current = write_row(conn, write.idempotency_key)
        state = OutcomeState(
            write=current,
            lease=lease_row(conn, write.repository, write.ref),
            tail=plans.tail(chain_of(write.task_id)),
        )
        return plans.apply(decide_write_outcome(state, outcome, now=read_clock(clock), actor=actor))

    return db.write(record)


def governed_write(
    db: Database,
    raw: Mapping[str, Any] | WriteRequest,
    *,
    clock: Clock = system_clock,
    lease_wait: float = LEASE_WAIT_SECONDS,
    attest_key: SigningKey | None = None,
) -> WriteAnswer:
    """Write a verified task's proposal to its bound branch; see the module's steps. Answers the
    APPLIED write with its `attestation`; any other outcome raises its code once recorded."""
    started = write_started()
    request = raw if isinstance(raw, WriteRequest) else WriteRequest.from_mapping(raw)
    actor = current_actor()
    try:
        answer = _checked_write(
            db, request, actor, clock=clock, lease_wait=lease_wait, attest_key=attest_key
        )
    except LedgerError as refused:
        if refused.code not in WRITE_REFUSALS:
            raise
        raise _recorded(db, request, refused, actor, clock) from None
    repository = get_repository(db, answer["repository"])
    path = repository.path
    remote = remote_of_repository(repository)
    notes_before = read_ref(path, NOTES_REF) if remote is not None else None
    attestation = attest_write(db, answer["idempotency_key"], attest_key, clock=clock)
    # A note that did not go with the branch (none could be signed before the push) goes now.
    if remote is not None and attestation["attested"] and read_ref(path, NOTES_REF) != notes_before:
        try:
            push_notes(path, remote, NOTES_REF)
        except LedgerError as failed:
            reason = f"attested, but the note was not pushed to the remote: {failed}"
            attestation = {**attestation, "reason": reason}
    if started is not None:
        _record_write_span(db, answer, started)
    pull_request = propose_write(db, answer, clock=clock)
    if pull_request is None:
        return {**answer, "attestation": attestation}
    return {**answer, "attestation": attestation, "pull_request": pull_request}


def _record_write_span(db: Database, answer: WriteAnswer, started: int) -> None:
    """The governed write's span, in the trace of the attempt whose proposal it wrote."""
    write = db.read(lambda conn: write_row(conn, answer["idempotency_key"]))
    assert write is not None  # the write answered was recorded first
    record_span(
        "governed_write",
        answer["task_id"],
        attempt_of_proposal(write.proposal_id),
        started=started,
        kind="INTERNAL",
        attributes={
            "vcs.repository.name": answer["repository"],
            "vcs.ref.head.name": answer["ref"],
            "vcs.ref.head.revision": answer["new_oid"],
            "aios.governed_write.state": answer["state"],
            "aios.idempotent_replay": answer["idempotent"],
        },
    )


def _recorded(
    db: Database, request: WriteRequest, refused: LedgerError, actor: Actor, clock: Clock
) -> LedgerError:
    """Record the refusal of a well-formed write, and return the error to raise: `refused`, or
    the refusal its key kept already."""

    def record(conn: Connection) -> LedgerError:
        plans = PlanExecutor(conn)
        state = _write_state(conn, plans, request)
        now = read_clock(clock)
        decision = decide_write_refusal(state, request, refused, now=now, actor=actor)
        if decision is None:
            return refused
        answer = plans.apply(decision)
        return LedgerError(answer["code"], answer["message"]) if answer["idempotent"] else refused

    return db.write(record)


def _checked_write(
    db: Database,
    request: WriteRequest,
    actor: Actor,
    *,
    clock: Clock,
    lease_wait: float,
    attest_key: SigningKey | None,
) -> WriteAnswer:
    prior = db.read(lambda conn: write_row(conn, request.idempotency_key))
    if prior is not None and prior.state == INTENDED:
        require_key_of_task(prior, request.task_id)
        return _answered(_settle(db, prior, clock))
    deadline = time.monotonic() + lease_wait
    read: list[WriteState] = []

    def decide(conn: Connection) -> Decision[WriteAnswer]:
        read.append(_write_state(conn, None, request))
        return decide_write_intent(read[-1], request, now=read_clock(clock), actor=actor)

    decision = _waiting_for_lease(lambda: db.read(decide), deadline, read)
    if isinstance(decision, Replay):
        return _answered(decision.response)
    # What the checks passed on: the repository and the proposal to bring into it.
    repository, proposal = read[-1].repository, read[-1].proposal
    assert repository is not None and proposal is not None
    repository_path = repository.path
    remote = remote_of_repository(repository)
    if remote is not None:
        # The checks read the mirror as the remote holds it now; a remote that cannot be read
        # (host key, credential, network) refuses the write here, before anything is pushed.
        fetch_mirror(repository_path, remote)
    target = check_ref_format(decision.response["ref"])
    # Only the repository knows whether another ref goes by the binding's branch name now.
    require_unambiguous_branch(target.removeprefix(HEADS), list_refs(repository_path))
    ensure_in_repository(db, repository_path, proposal)

    def intend(conn: Connection) -> WriteAnswer:
        plans = PlanExecutor(conn)
        state = _write_state(conn, plans, request)
        return plans.apply(decide_write_intent(state, request, now=read_clock(clock), actor=actor))

    intended = _waiting_for_lease(lambda: db.write(intend), deadline)
    if intended["idempotent"]:
        return _answered(intended)
    write = db.read(lambda conn: write_row(conn, request.idempotency_key))
    assert write is not None
    if remote is None:
        pushed = PushAnswer(
            move_ref(
                repository_path, write.ref, write.new_oid, write.old_oid, write.idempotency_key
            )
        )
    else:
        note = note_to_push(db, write.idempotency_key, attest_key, clock=clock)
        # Called through its module, so that the crash tests' helper process can die on either
        # side of the push, as of `move_ref`.
        pushed = remotes.push_write(
            repository_path,
            remote,
            write.ref,
            write.new_oid,
            write.old_oid,
            zero=zero_oid(write.new_oid),
            note=None if note is None else PushedNote(NOTES_REF, note),
        )
    settled = _settle(db, write, clock, pushed)
    # A retry fetches the commit again from the stored bundle.
    run_git(
        ["--git-dir", repository_path, "update-ref", "-d", quarantine_ref(proposal.bundle_sha256)],
        check=False,
    )
    return _answered(settled, pushed.message)


def _waiting_for_lease(
    attempt: Callable[[], R], deadline: float, read: Sequence[WriteState] = ()
) -> R:
    """`attempt()`, again while another write holds the writer lease until `deadline`; not for
    a WRITER_LEASE_HELD its key kept (the last state `read`)."""
    while True:
        try:
            return attempt()
        except LedgerError as refused:
            if (
                refused.code != "WRITER_LEASE_HELD"
                or (read and read[-1].refused is not None)
                or time.monotonic() >= deadline
            ):
                raise
            time.sleep(LEASE_POLL_SECONDS)


def recover_writes(db: Database, *, clock: Clock = system_clock) -> list[WriteAnswer]:
    """Settle every write left INTENDED by a crash, from its ref as read now; run it when no
    governed write is in flight."""
    rows = db.read(lambda conn: fetch_all(conn, "governed_writes_in_doubt"))
    return [_settle(db, GovernedWriteRow.from_row(row), clock) for row in rows]
