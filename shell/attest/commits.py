"""Attesting landed governed writes, and reading a commit back. Attesting never undoes a write,
only answers why nothing was attested; a write to a remote is signed before its push
(`note_to_push`), so that the note lands in the same atomic push as the branch.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from aios_ledger.core import LedgerError, chain_of
from aios_ledger.core.attest import (
    AttestationAnswer,
    AttestRequest,
    AttestState,
    CommitAttestationRow,
    attestation_note,
    decide_attest_commit,
    open_envelope,
)
from aios_ledger.core.attest.decisions import (
    NOTES_REF,
    not_attested,
    note_parts,
    unsigned_statement,
)
from aios_ledger.core.attest.dsse import note_key_id
from aios_ledger.core.attest.statements import (
    PROVENANCE_TYPE,
    SOURCE_PROVENANCE_TYPE,
    VSA_TYPE,
    check_source_summary,
    statement_subject_commit,
)
from aios_ledger.core.digests import canonical_json, sha256_hex
from aios_ledger.core.git import GovernedWriteRow
from aios_ledger.core.jsonvalue import JsonObject, loads_object
from aios_ledger.core.proofs import VerifierKey
from aios_ledger.core.tasks.refusals import refusal_entries
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.attest.facts import (
    attempt_events,
    attempt_reviews,
    commit_facts,
    task_events,
)
from aios_ledger.shell.attest.keys import SigningKey
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import Database, fetch_all, fetch_record
from aios_ledger.shell.db.merkle import integrate, prove_inclusion, tree_head_at
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.git.remotes import (
    NOTES_IDENTITY,
    URL_INVALID,
    Credentials,
    Remote,
    check_credentials,
    list_remote,
    refresh_mirror,
    remote_kind,
    remote_of,
    run_remote,
)
from aios_ledger.shell.git.repos import require_repository
from aios_ledger.shell.git.runner import run_git
from aios_ledger.shell.proofs.checkpoints import latest_checkpoint
from aios_ledger.shell.proofs.keys import check_ed25519

log = logging.getLogger(__name__)
NOTE_ATTEMPTS = 5
# Beside the repository's own files (a bare repository's folder): the attestation notes' lock.
NOTES_LOCK = "aios-ledger-notes.lock"
NOTE_RETRY_SECONDS = 0.05


def attestation_row(conn: Connection, key: str) -> CommitAttestationRow | None:
    return fetch_record(
        conn, "get_commit_attestation", {"idempotency_key": key}, CommitAttestationRow
    )


def add_note(repository_path: str, commit: str, note_json: str) -> None:
    """Attach (or replace) the commit's note under a lock: `git notes add` moves the notes ref
    without comparing it, so two notes at once would drop one. A failure is tried again."""
    notes = ["notes", "--ref", NOTES_REF, "add", "--force", "--file", "-", commit]
    with _notes_lock(repository_path):
        attached = read_note(repository_path, commit)
        if attached is not None and attached.strip() == note_json:
            return  # a note pushed with its branch is there already: no second notes commit
        for attempt in range(NOTE_ATTEMPTS):
            try:
                run_git(
                    ["--git-dir", repository_path, *NOTES_IDENTITY, *notes],
                    stdin=note_json.encode("ascii") + b"\n",
                )
                return
            except LedgerError:
                if attempt == NOTE_ATTEMPTS - 1:
                    raise
                time.sleep(NOTE_RETRY_SECONDS * (attempt + 1))


@contextlib.contextmanager
def _notes_lock(repository_path: str) -> Iterator[None]:
    try:
        handle = open(os.path.join(repository_path, NOTES_LOCK), "a")  # noqa: SIM115
    except OSError as exc:
        raise LedgerError(
            "GIT_FAILED", f"cannot lock the notes of {repository_path}: {exc.strerror}"
        ) from None
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # released as the file closes
        yield


def read_note(repository_path: str, commit: str) -> str | None:
    shown = run_git(
        ["--git-dir", repository_path, "notes", "--ref", NOTES_REF, "show", commit], check=False
    )
    return shown.text if shown.returncode == 0 else None


def _governed_write(conn: Connection, key: str) -> GovernedWriteRow | None:
    return fetch_record(conn, "get_governed_write", {"idempotency_key": key}, GovernedWriteRow)


def note_to_push(
    db: Database, write_key: str, signing: SigningKey | None, *, clock: Clock = system_clock
) -> str | None:
    """The note of an intended write about to be pushed, signed now (its time the time it
    lands), to go to the remote in the branch's own push; None when no key is configured or it
    cannot be made (the write then lands unattested, as when attesting fails after it)."""
    if signing is None:
        return None

    def prepare(conn: Connection) -> str:
        write = _governed_write(conn, write_key)
        if write is None:
            raise LedgerError("WRITE_NOT_FOUND", f"no governed write {write_key!r}")
        landing = write._replace(updated_at=read_clock(clock).text)
        return canonical_json(
            attestation_note(commit_facts(conn, landing), signing.sign, signing.keyid)
        )

    try:
        return db.read(prepare)
    except Exception:
        # A defect in signing must not stop the write: it is attested after it lands instead.
        log.exception("signing the note of governed write %r before its push failed", write_key)
        return None


def attest_write(
    db: Database, write_key: str, signing: SigningKey | None, *, clock: Clock = system_clock
) -> AttestationAnswer:
    """Attest the landed write under `write_key`; a failure is an answer with `attested: false`
    and its reason, never an exception."""
    if signing is None:
        return not_attested(
            "no attestation key configured (--attest-key, [attest] key, "
            "$AIOS_LEDGER_ATTEST_KEY or the attest-key credential)"
        )
    try:
        return _attest(db, write_key, signing, clock)
    except LedgerError as failed:
        return not_attested(f"{failed.code}: {failed.detail}")
    except Exception:
        # A defect in attesting must not cost the caller the answer of a write that landed.
        log.exception("attesting governed write %r failed", write_key)
        return not_attested("INTERNAL_ERROR: attesting failed (see the log)")


def _attest(db: Database, write_key: str, signing: SigningKey, clock: Clock) -> AttestationAnswer:
    def found(conn: Connection) -> tuple[GovernedWriteRow, str]:
        write = _governed_write(conn, write_key)
        if write is None:
            raise LedgerError("WRITE_NOT_FOUND", f"no governed write {write_key!r}")
        return write, require_repository(conn, write.repository).path

    write, path = db.read(found)
    pushed = None
    if write.state == "APPLIED" and remote_of(path) is not None:
        pushed = _pushed_note(path, write, signing)

    def prepare(conn: Connection) -> JsonObject | None:
        if attestation_row(conn, write_key) is not None or write.state != "APPLIED":
            return None
        return pushed or attestation_note(commit_facts(conn, write), signing.sign, signing.keyid)

    note = db.read(prepare)

    actor = current_actor()

    def record(conn: Connection) -> tuple[AttestationAnswer, str]:
        plans = PlanExecutor(conn)
        prior = attestation_row(conn, write_key)
        tail = plans.tail(chain_of(write.task_id))
        state = AttestState(write=_governed_write(conn, write_key), prior=prior, tail=tail)
        request = AttestRequest(write_key, note or {})
        answer = plans.apply(
            decide_attest_commit(state, request, now=read_clock(clock), actor=actor)
        )
        stored = prior.note_json if prior is not None else canonical_json(note)
        return answer, stored

    answer, note_json = db.write(record)
    try:
        add_note(path, write.new_oid, note_json)
    except LedgerError as failed:
        # The same write attested again attaches the recorded note.
        return {**answer, "reason": f"recorded, but the note was not attached: {failed}"}
    return answer


def _pushed_note(mirror: str, write: GovernedWriteRow, signing: SigningKey) -> JsonObject | None:
    """The note this write pushed with its branch, as the remote holds it (the mirror fetched
    again when it lacks it: a write recovered after a crash), when it is this write's own,
    signed by this key; None when there is none (it is then signed anew)."""
    text = read_note(mirror, write.new_oid)
    if text is None:
        refresh_mirror(mirror)
        text = read_note(mirror, write.new_oid)
    if text is None:
        return None
    try:
        note = loads_object(text.strip(), what="note")
        statements = _opened_statements(note, signing.signer.verifier, write.new_oid)
        predicate = statements["provenance"].get("predicate")
        definition = predicate.get("buildDefinition") if isinstance(predicate, dict) else None
        internal = definition.get("internalParameters") if isinstance(definition, dict) else None
    except LedgerError:
        return None
    if not isinstance(internal, dict) or internal.get("writeKey") != write.idempotency_key:
        return None
    return note


REVIEW_FIELDS = ("aux_id", "state", "evidence_digest", "output_digest")
EVENT_FIELDS = ("event_id", "agent_id", "actor", "created_at", "payload", "chain", "chain_seq")


def _event_summary(event: dict[str, Any]) -> dict[str, Any]:
    """An event as `why` shows it: its type under `type`, and its seal."""
    shown = {name: event.get(name) for name in EVENT_FIELDS}
    return {**shown, "type": event["event_type"], "seal": event.get("seal")}


def why_commit(db: Database, commit: str, repository: str | None = None) -> dict[str, Any]:
    """Everything the ledger knows of how `commit` came to be, per landed write that moved a
    branch to it, with every event of the task and its inclusion proof in the Merkle log."""
    commit = commit.strip().lower()
    if not (4 <= len(commit) <= 64) or any(c not in "0123456789abcdef" for c in commit):
        raise LedgerError("FIELDS_INVALID", f"{commit[:80]!r} is not a commit id")

    def read(conn: Connection) -> dict[str, Any]:
        rows = fetch_all(
            conn, "governed_writes_of_commit", {"commit_oid": commit, "repository": repository}
        )
        if not rows:
            raise LedgerError(
                "COMMIT_NOT_FOUND",
                f"no landed governed write moved a branch to {commit}"
                + (f" in {repository}" if repository else ""),
            )
        return {
            "commit": commit,
            "writes": [_why_write(conn, GovernedWriteRow.from_row(r)) for r in rows],
        }

    return _with_inclusion_proofs(db, db.read(read))


def _with_inclusion_proofs(db: Database, found: dict[str, Any]) -> dict[str, Any]:
    """Each event's inclusion proof, all against the latest signed checkpoint when it holds
    every event (a reader can check it with the log's key), else against the tree head now.
    What committed is integrated first (on PostgreSQL), so every event has its leaf."""
    integrate(db)
    try:
        checkpoint: dict[str, Any] | None = latest_checkpoint(db).public()
    except LedgerError as refused:
        if refused.code != "CHECKPOINT_NOT_FOUND":
            raise
        checkpoint = None
    if checkpoint is not None:
        try:
            return _proven(db, found, int(checkpoint["size"]), checkpoint)
        except LedgerError as refused:
            if refused.code != "TREE_SIZE_INVALID":  # an event after the checkpoint
                raise
    return _proven(db, found, tree_head_at(db).size, None)


def _proven(
    db: Database, found: dict[str, Any], size: int, checkpoint: dict[str, Any] | None
) -> dict[str, Any]:
    for write in found["writes"]:
        write["inclusion_proofs"] = [
            prove_inclusion(db, int(event["event_id"]), size).public() for event in write["events"]
        ]
    return {**found, "tree_head": tree_head_at(db, size).public(), "checkpoint": checkpoint}


def _why_write(conn: Connection, write: GovernedWriteRow) -> dict[str, Any]:
    facts = commit_facts(conn, write)
    events = task_events(conn, write.task_id)
    attempt = facts.attempt
    claim, _, _ = attempt_events(events, attempt)
    reviews = attempt_reviews(conn, write.task_id, attempt)
    verdicts = [e for e in events if e["event_type"] == "TASK_VERIFIED"]
    # Who asked for the write: the actor of the first event its idempotency key names.
    asked = [
        e
        for e in events
        if e["event_type"].startswith("GOVERNED_WRITE_")
        and e["payload"].get("idempotency_key") == write.idempotency_key
    ]
    attestation = attestation_row(conn, write.idempotency_key)
    attested: dict[str, Any] | None = None
    if attestation is not None:
        note = attestation.note()
        attested = {
            "keyid": attestation.keyid,
            "notes_ref": NOTES_REF,
            "provenance_sha256": attestation.provenance_sha256,
            "review_sha256": attestation.review_sha256,
            "created_at": attestation.created_at,
            "statements": {part: unsigned_statement(note.get(part)) for part in note_parts(note)},
            "note": note,
        }
    return {
        "repository": write.repository,
        # Where the write went: the git server's URL sealed with the repository (None: in place).
        "repository_url": facts.repository_url,
        "ref": write.ref,
        "task": {
            "task_id": write.task_id,
            "attempt": attempt,
            "envelope_digest": facts.execution_digest,
        },
        "claim": None if claim is None else _event_summary(claim),
        "agent": facts.agent_id,
        "capabilities": list(facts.capabilities),
        "evidence": {"run_id": facts.invocation_id, "snapshot_digest": facts.evidence_digest},
        "auxiliary_review": [
            {
                **{name: r[name] for name in REVIEW_FIELDS},
                "output": None if r["output_json"] is None else loads_object(str(r["output_json"])),
            }
            for r in reviews
        ],
        "verdict": {
            "decision": facts.decision,
            "reason": facts.reason,
            "verified_at": facts.verified_on,
            "reviewer": facts.reviewer,
            "verified_by": verdicts[-1].get("actor") if verdicts else None,
        },
        "governed_write": {
            "idempotency_key": write.idempotency_key,
            "old_oid": write.old_oid,
            "new_oid": write.new_oid,
            "state": write.state,
            "changed_files": list(write.changed_files()),
            "applied_at": write.updated_at,
            "written_by": asked[0].get("actor") if asked else None,
        },
        "attestation": attested,
        # What was tried and refused by a check, by whom, and why.
        "refused": list(refusal_entries(events)),
        "events": [_event_summary(e) for e in events],
        "inclusion_proofs": [],
    }


PREDICATE_TYPES = {
    "provenance": PROVENANCE_TYPE,
    "review": VSA_TYPE,
    "source_provenance": SOURCE_PROVENANCE_TYPE,
    "source_summary": VSA_TYPE,
}


def _opened_statements(note: JsonObject, verifier: VerifierKey, oid: str) -> dict[str, JsonObject]:
    """Each Statement of the note, its signature by `verifier`, type and subject `oid` checked."""
    keyid = note_key_id(verifier.name, verifier.public_key)
    opened: dict[str, JsonObject] = {}
    for part in note_parts(note):
        predicate_type = PREDICATE_TYPES[part]
        statement = open_envelope(note.get(part), verifier.public_key, check_ed25519, keyid)
        if statement.get("predicateType") != predicate_type:
            raise LedgerError(
                "ATTESTATION_INVALID",
                f"the {part} Statement's predicateType is not {predicate_type}",
            )
        subject = statement_subject_commit(statement)
        if subject != oid:
            raise LedgerError(
                "ATTESTATION_SUBJECT_MISMATCH",
                f"the {part} Statement is about commit {subject}, not {oid}",
            )
        opened[part] = statement
    return opened


def verify_commit_attestation(
    repository_path: str, commit: str, verifier: VerifierKey
) -> dict[str, Any]:
    """Check `commit`'s note, each DSSE signature and each Statement's subject, and that the
    Source VSA rests on the note's own source provenance and review, from its repository alone;
    answers what was verified."""
    resolved = run_git(
        ["--git-dir", repository_path, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
        check=False,
    )
    if resolved.returncode != 0:
        raise LedgerError("COMMIT_NOT_FOUND", f"{repository_path} holds no commit {commit!r}")
    oid = resolved.text.strip()
    text = read_note(repository_path, oid)
    if text is None:
        raise LedgerError("ATTESTATION_MISSING", f"commit {oid} has no note under {NOTES_REF}")
    try:
        note = loads_object(text.strip(), what="note")
    except LedgerError as refused:
        raise LedgerError(
            "ATTESTATION_INVALID", f"the note of {oid} is not JSON: {refused.detail}"
        ) from None
    verified: dict[str, Any] = {
        "commit": oid,
        "notes_ref": NOTES_REF,
        "keyid": note_key_id(verifier.name, verifier.public_key),
        **_opened_statements(note, verifier, oid),
    }
    predicate = verified["review"].get("predicate")
    verified["verification_result"] = (
        predicate.get("verificationResult") if isinstance(predicate, dict) else None
    )
    # A note from before the source track carries no source statements: nothing to assert.
    verified["source_levels"] = (
        check_source_summary(
            verified["source_summary"],
            verified["source_provenance"],
            verified["review"],
            source_provenance_digest=sha256_hex(note["source_provenance"]),
            review_digest=sha256_hex(note["review"]),
        )
        if "source_summary" in verified
        else None
    )
    verified["intact"] = True
    return verified


def verify_remote_attestation(
    url: str, commit: str, verifier: VerifierKey, credentials: Credentials
) -> dict[str, Any]:
    """`verify_commit_attestation` against the branches and notes a remote serves now, fetched
    with the credential `repo add` takes into a scratch repository dropped afterwards."""
    kind = remote_kind(url)
    if kind is None:
        raise LedgerError(URL_INVALID, f"{url[:200]!r} is not a remote URL")
    remote = Remote(url, kind, check_credentials(kind, credentials))
    served = list_remote(remote).refs
    if NOTES_REF not in served:
        raise LedgerError("ATTESTATION_MISSING", f"{url} serves no {NOTES_REF}")
    with tempfile.TemporaryDirectory(prefix="aios-verify-") as scratch:
        run_git(["init", "--quiet", "--bare", scratch])
        fetch = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", url]
        refspecs = [f"+{NOTES_REF}:{NOTES_REF}"]
        if any(name.startswith("refs/heads/") for name in served):
            refspecs.append("+refs/heads/*:refs/heads/*")
        run_remote(remote, [*fetch, *refspecs], what="cannot fetch from", git_dir=scratch)
        return {**verify_commit_attestation(scratch, commit, verifier), "remote": url}
