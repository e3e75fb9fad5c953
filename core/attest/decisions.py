"""Attesting a landed governed write: its Statements signed into the note the commit carries, and
the sealed `COMMIT_ATTESTED` that records it."""

from __future__ import annotations

import base64
import binascii
from typing import cast

import attrs
from aios_ledger.core.actors import Actor
from aios_ledger.core.attest.dsse import Sign, sign_envelope
from aios_ledger.core.attest.records import CommitAttestationRow
from aios_ledger.core.attest.statements import (
    CommitFacts,
    provenance_statement,
    review_statement,
    source_provenance_statement,
    source_summary_statement,
    statement_subject_commit,
)
from aios_ledger.core.digests import canonical_json, sha256_hex
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.git.answers import AttestationAnswer
from aios_ledger.core.git.records import GovernedWriteRow
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, loads_object
from aios_ledger.core.log.plan import Decision, Replay, sealed_plan
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.statements import SqlWrite, Statement
from aios_ledger.core.timestamps import Timestamp, require_timestamp

COMMIT_ATTESTED = "COMMIT_ATTESTED"
NOTE_SCHEMA = "aios.commit_attestations.v2"
# A note before the source track's statements: its provenance and review alone.
NOTE_SCHEMA_V1 = "aios.commit_attestations.v1"
NOTE_PARTS = ("provenance", "review", "source_provenance", "source_summary")
NOTE_PARTS_V1 = ("provenance", "review")
NOTES_REF = "refs/notes/aios-attestations"


def attestation_note(facts: CommitFacts, sign: Sign, keyid: str) -> JsonObject:
    """The note for `facts`' commit, each Statement signed: its SLSA Provenance, the review's
    VSA, the source provenance of the branch's move, and the Source VSA over both."""
    provenance = sign_envelope(provenance_statement(facts), sign, keyid)
    review = sign_envelope(review_statement(facts, sha256_hex(provenance)), sign, keyid)
    source = sign_envelope(source_provenance_statement(facts), sign, keyid)
    summary = sign_envelope(
        source_summary_statement(facts, sha256_hex(source), sha256_hex(review)), sign, keyid
    )
    return {
        "schema": NOTE_SCHEMA,
        "provenance": provenance,
        "review": review,
        "source_provenance": source,
        "source_summary": summary,
    }


def note_parts(note: JsonObject) -> tuple[str, ...]:
    """The envelopes a note of its schema holds, else `ATTESTATION_INVALID`."""
    schema = note.get("schema")
    if schema == NOTE_SCHEMA:
        return NOTE_PARTS
    if schema == NOTE_SCHEMA_V1:
        return NOTE_PARTS_V1
    raise LedgerError("ATTESTATION_INVALID", f"the note's schema is not {NOTE_SCHEMA}")


def unsigned_statement(envelope: JsonValue) -> JsonObject:
    """The Statement an envelope carries, its signature unchecked."""
    if not isinstance(envelope, dict) or not isinstance(envelope.get("payload"), str):
        raise LedgerError("ATTESTATION_INVALID", "not a DSSE envelope")
    try:
        payload = base64.b64decode(str(envelope["payload"]).encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise LedgerError("ATTESTATION_INVALID", "the payload is not base64") from None
    return loads_object(payload, what="payload")


@attrs.frozen
class AttestState:
    """The write attested, its attestation already recorded, and the log's tail."""

    write: GovernedWriteRow | None
    prior: CommitAttestationRow | None
    tail: LogTail


# What an answer and the COMMIT_ATTESTED event take of the attestation's row (None: unattested).
ATTESTED_FIELDS = ("commit_oid", "keyid", "provenance_sha256", "review_sha256")


def attestation_answer(row: CommitAttestationRow, *, idempotent: bool) -> AttestationAnswer:
    attested = {name: getattr(row, name) for name in ATTESTED_FIELDS}
    answer = {"attested": True, "notes_ref": NOTES_REF, "reason": None, **attested}
    return cast(AttestationAnswer, {**answer, "idempotent": idempotent})


def not_attested(reason: str) -> AttestationAnswer:
    answer = {"attested": False, "notes_ref": NOTES_REF, "reason": reason, "idempotent": False}
    return cast(AttestationAnswer, {**answer, **dict.fromkeys(ATTESTED_FIELDS)})


def _keyid_of(envelope: JsonValue) -> str:
    signatures = envelope.get("signatures") if isinstance(envelope, dict) else None
    if not isinstance(signatures, list) or len(signatures) != 1:
        raise LedgerError("ATTESTATION_INVALID", "an envelope holds one signature")
    signature = signatures[0]
    keyid = signature.get("keyid") if isinstance(signature, dict) else None
    if not isinstance(keyid, str) or not keyid:
        raise LedgerError("ATTESTATION_INVALID", "the signature names no keyid")
    return keyid


@attrs.frozen
class AttestRequest:
    """Attest the governed write under `write_key` with `note` (its two signed envelopes)."""

    write_key: str
    note: JsonObject


def decide_attest_commit(
    state: AttestState, request: AttestRequest, *, now: Timestamp, actor: Actor
) -> Decision[AttestationAnswer]:
    """Record the note of an APPLIED write; an attested write replays its first attestation."""
    require_timestamp(now)
    key, note = request.write_key, request.note
    if state.prior is not None:
        return Replay(attestation_answer(state.prior, idempotent=True))
    write = state.write
    if write is None or write.idempotency_key != key:
        raise LedgerError("WRITE_NOT_FOUND", f"no governed write {key!r}")
    if write.state != "APPLIED":
        raise LedgerError(
            "WRITE_NOT_APPLIED", f"write {key!r} is {write.state}: only a landed commit is attested"
        )
    if note.get("schema") != NOTE_SCHEMA:
        raise LedgerError("ATTESTATION_INVALID", f"the note's schema is not {NOTE_SCHEMA}")
    provenance, review = note.get("provenance"), note.get("review")
    envelopes = [note.get(part) for part in NOTE_PARTS]
    for envelope in envelopes:
        if statement_subject_commit(unsigned_statement(envelope)) != write.new_oid:
            raise LedgerError(
                "ATTESTATION_SUBJECT_MISMATCH", f"a Statement is not about commit {write.new_oid}"
            )
    keyid = _keyid_of(provenance)
    if any(_keyid_of(envelope) != keyid for envelope in envelopes):
        raise LedgerError("ATTESTATION_INVALID", "the envelopes are signed by different keys")
    row = CommitAttestationRow(
        idempotency_key=write.idempotency_key,
        task_id=write.task_id,
        repository=write.repository,
        commit_oid=write.new_oid,
        keyid=keyid,
        note_json=canonical_json(note),
        provenance_sha256=sha256_hex(provenance),
        review_sha256=sha256_hex(review),
        created_at=now.text,
    )
    event = EventAppend(
        task_id=write.task_id,
        agent_id=None,
        event_type=COMMIT_ATTESTED,
        payload={
            "idempotency_key": row.idempotency_key,
            "repository": row.repository,
            "ref": write.ref,
            "notes_ref": NOTES_REF,
            **{name: getattr(row, name) for name in ATTESTED_FIELDS},
        },
        created_at=now.text,
        rows=(row.image(),),
        actor=actor,
    )
    insert = SqlWrite(Statement.COMMIT_ATTESTATION_INSERT, row._asdict())
    return sealed_plan(
        (insert,), (event,), attestation_answer(row, idempotent=False), tail=state.tail
    )
