"""The attestation formats, checked by code that is not the project's own: DSSE envelopes
verified by securesystemslib, Statements and their predicates parsed by in-toto-attestation's
protobuf bindings (unknown fields refused), the PAE against the DSSE spec's worked example,
and golden snapshots of both Statements and envelopes (Ed25519 is deterministic)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.actors import Actor
from aios_ledger.core.attest import (
    AttestRequest,
    AttestState,
    CommitFacts,
    attestation_note,
    decide_attest_commit,
    note_key_id,
    open_envelope,
    pae,
    provenance_statement,
    review_statement,
    sign_envelope,
    source_provenance_statement,
    source_summary_statement,
)
from aios_ledger.core.attest.decisions import COMMIT_ATTESTED, NOTE_SCHEMA
from aios_ledger.core.git import GovernedWriteRow
from aios_ledger.core.log.plan import Replay, WritePlan
from aios_ledger.core.log.tail import LogTail
from aios_ledger.core.timestamps import Timestamp
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.predicates.vsa.v1 import vsa_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from securesystemslib.signer import CryptoSigner, SSlibKey  # type: ignore[attr-defined]
from syrupy.assertion import SnapshotAssertion

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

SEED = bytes(range(32))
KEY = Ed25519PrivateKey.from_private_bytes(SEED)
PUBLIC = KEY.public_key().public_bytes_raw()
KEY_NAME = "ledger.example"
KEYID = note_key_id(KEY_NAME, PUBLIC)


def check(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """The test's own Ed25519 check, through `cryptography` directly."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except InvalidSignature:
        return False
    return True


COMMIT = "0406c5db05230aeaf2ee7114c8e8977e52135bc4"
NOW = Timestamp.parse("2026-12-01T16:05:21.000Z")


def facts(**changes: Any) -> CommitFacts:
    values: dict[str, Any] = {
        "repository": "acme/gadgets",
        "branch": "agent/gadgets",
        "ref": "refs/heads/agent/gadgets",
        "commit_oid": COMMIT,
        "base_oid": "abd2c56de14078e7ebbe122e51daaec299a9832b",
        "old_oid": "abd2c56de14078e7ebbe122e51daaec299a9832b",
        "write_key": "w-task-gadget-docs",
        "task_id": "task-gadget-docs",
        "attempt": 2,
        "agent_id": "demo-worker",
        "capabilities": ("agent.runtime.openclaw",),
        "envelope": {"schema": "aios.execution_envelope.v1", "task_id": "task-gadget-docs"},
        "execution_digest": "sha256:" + "6f" * 32,
        "evidence_digest": "sha256:" + "4d" * 32,
        "proposal_id": "task-gadget-docs#2",
        "bundle_sha256": "e6" * 32,
        "result_digest": "de" * 32,
        "changed_files": ("CHANGELOG.md", "NOTES.md"),
        "started_on": "2026-12-01T16:05:19.292Z",
        "finished_on": "2026-12-01T16:05:19.504Z",
        "applied_on": "2026-12-01T16:05:20.900Z",
        "decision": "SUCCEEDED",
        "reason": "criteria met on attempt 2",
        "verified_on": "2026-12-01T16:05:20.100Z",
        "reviewer": "demo-reviewer",
        "review_id": "review:task-gadget-docs:2:1",
        "review_output_digest": "sha256:" + "06" * 32,
        "success_criteria": [{"id": "done", "description": "gadgets documented"}],
        "governance": {"force_push": False, "direct_main_write": False},
        "ledger_version": "0.1.0",
    }
    values.update(changes)
    return CommitFacts(**values)


def plain(value: object) -> Any:
    """A Statement as a reader's JSON parser gives it (untyped)."""
    return json.loads(json.dumps(value))


def write_row(**changes: Any) -> GovernedWriteRow:
    row = GovernedWriteRow(
        idempotency_key="w-task-gadget-docs",
        task_id="task-gadget-docs",
        proposal_id="task-gadget-docs#2",
        repository="acme/gadgets",
        ref="refs/heads/agent/gadgets",
        old_oid="abd2c56de14078e7ebbe122e51daaec299a9832b",
        new_oid=COMMIT,
        generation=1,
        state="APPLIED",
        code=None,
        observed_oid=COMMIT,
        changed_files_json='["CHANGELOG.md","NOTES.md"]',
        revision=2,
        created_at="2026-12-01T16:05:20.800Z",
        updated_at="2026-12-01T16:05:20.900Z",
    )
    return row._replace(**changes)


def empty_tail() -> LogTail:
    return LogTail.read(0, ("task:task-gadget-docs",), ())


def test_pae_is_the_dsse_specs_example() -> None:
    # protocol.md: PAE("http://example.com/HelloWorld", "hello world")
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae("", b"") == b"DSSEv1 0  0 "


def test_the_key_id_is_the_signed_note_key_hash() -> None:
    # c2sp.org/signed-note: the first four bytes of SHA-256(name || 0x0A || 0x01 || key).
    import hashlib

    expected = hashlib.sha256(KEY_NAME.encode() + b"\n\x01" + PUBLIC).digest()[:4].hex()
    assert note_key_id(KEY_NAME, PUBLIC) == expected


def test_securesystemslib_verifies_the_envelope_signature() -> None:
    """An independent DSSE verifier: securesystemslib's Ed25519 key over the PAE it builds."""
    from securesystemslib.dsse import Envelope

    keyid = KEYID
    envelope = plain(sign_envelope(provenance_statement(facts()), KEY.sign, keyid))
    public = SSlibKey.from_crypto(KEY.public_key(), keyid=keyid)
    parsed = Envelope.from_dict(copy.deepcopy(envelope))
    verified = parsed.verify([public], 1)
    assert set(verified) == {keyid}
    # securesystemslib's own PAE is ours byte for byte, and a signature it makes opens here.
    assert parsed.pae() == pae(envelope["payloadType"], parsed.payload)
    theirs = Envelope(parsed.payload, parsed.payload_type, {})
    theirs.sign(CryptoSigner(KEY, public))
    assert open_envelope(theirs.to_dict(), PUBLIC, check)["_type"] == (
        "https://in-toto.io/Statement/v1"
    )
    # A payload changed after signing fails securesystemslib's check too.
    statement = json.loads(base64.b64decode(str(envelope["payload"])))
    statement["subject"][0]["digest"]["gitCommit"] = "1" * 40
    tampered = {**envelope, "payload": base64.b64encode(json.dumps(statement).encode()).decode()}
    from securesystemslib.exceptions import VerificationError

    with pytest.raises(VerificationError):
        Envelope.from_dict(copy.deepcopy(tampered)).verify([public], 1)


def _strict_predicate(statement: dict[str, Any], message: Any) -> Any:
    """The Statement through in-toto-attestation's Statement proto and validator, and its
    predicate through the predicate's proto, refusing any field the spec does not define."""
    parsed = json_format.ParseDict(statement, statement_pb2.Statement())
    Statement.copy_from_pb(parsed).validate()
    return json_format.ParseDict(statement["predicate"], message)


def test_in_toto_attestation_parses_the_provenance_statement() -> None:
    statement = plain(provenance_statement(facts()))
    provenance = _strict_predicate(statement, provenance_pb2.Provenance())
    assert provenance.build_definition.build_type == "https://aios-ledger.dev/governed-write/v1"
    assert provenance.run_details.metadata.invocation_id == "task-gadget-docs@2"
    assert provenance.run_details.builder.id.endswith("/builders/worker/demo-worker")
    dependencies = provenance.build_definition.resolved_dependencies
    assert dependencies[0].digest["gitCommit"] == facts().base_oid
    assert dependencies[1].digest["sha256"] == "4d" * 32
    assert [b.name for b in provenance.run_details.byproducts][:2] == ["CHANGELOG.md", "NOTES.md"]
    assert statement["subject"] == [
        {"name": "acme/gadgets@agent/gadgets", "digest": {"gitCommit": COMMIT}}
    ]
    external = statement["predicate"]["buildDefinition"]["externalParameters"]
    assert external["envelopeDigest"] == facts().execution_digest


@pytest.mark.parametrize(("decision", "result"), [("SUCCEEDED", "PASSED"), ("FAILED", "FAILED")])
def test_in_toto_attestation_parses_the_review_summary(decision: str, result: str) -> None:
    statement = plain(review_statement(facts(decision=decision), "ab" * 32))
    # in-toto-attestation 0.9.3's VSA proto declares `verified_levels` a single string, while
    # the VSA v1 spec (slsa.dev/spec/v1.0/verification_summary) makes it an array of strings:
    # the spec wins; the proto checks every other field, and the array is checked here.
    levels = statement["predicate"]["verifiedLevels"]
    assert isinstance(levels, list) and all(isinstance(level, str) for level in levels)
    without_levels = copy.deepcopy(statement)
    del without_levels["predicate"]["verifiedLevels"]
    summary = _strict_predicate(without_levels, vsa_pb2.VerificationSummary())
    assert summary.verification_result == result
    assert summary.verifier.id == "https://aios-ledger.dev/reviewers/demo-reviewer"
    assert summary.resource_uri == f"git+acme/gadgets@{COMMIT}"
    assert summary.policy.uri == "https://aios-ledger.dev/policy/review/v1"
    assert summary.input_attestations[0].digest["sha256"] == "ab" * 32
    assert levels == (["SLSA_BUILD_LEVEL_1"] if result == "PASSED" else ["FAILED"])


@pytest.mark.parametrize(
    ("changes", "levels"),
    [
        ({}, ["SLSA_SOURCE_LEVEL_1", "SLSA_SOURCE_TWO_PARTY_REVIEWED"]),
        ({"reviewer": "demo-worker"}, ["SLSA_SOURCE_LEVEL_1"]),
        ({"reviewer": None}, ["SLSA_SOURCE_LEVEL_1"]),
        ({"agent_id": None}, ["SLSA_SOURCE_LEVEL_1"]),
        ({"decision": "FAILED"}, ["FAILED"]),
    ],
)
def test_the_source_summary_is_a_source_vsa(changes: dict[str, Any], levels: list[str]) -> None:
    """The Source VSA as the SLSA source track gives it: the revision's `gitCommit` and its
    `sourceRefs`, the repository as `resourceUri`, one source level, and two-party review only
    when a named reviewer is not the agent."""
    statement = plain(source_summary_statement(facts(**changes), "5a" * 32, "7e" * 32))
    assert statement["predicate"]["verifiedLevels"] == levels
    without_levels = copy.deepcopy(statement)
    del without_levels["predicate"]["verifiedLevels"]
    summary = _strict_predicate(without_levels, vsa_pb2.VerificationSummary())
    assert summary.resource_uri == "git+acme/gadgets"
    assert summary.verifier.id == "https://aios-ledger.dev/verifiers/source"
    assert summary.slsa_version == "1.2"
    assert [i.digest["sha256"] for i in summary.input_attestations] == ["5a" * 32, "7e" * 32]
    assert statement["subject"] == [
        {
            "name": "acme/gadgets@agent/gadgets",
            "digest": {"gitCommit": COMMIT},
            "annotations": {"sourceRefs": ["refs/heads/agent/gadgets"]},
        }
    ]


def test_the_source_provenance_is_source_tools_predicate() -> None:
    """The fields of slsa-framework/protos' SourceProvenancePred, in protojson's names."""
    statement = plain(source_provenance_statement(facts()))
    assert statement["predicateType"] == (
        "https://github.com/slsa-framework/source-tool/source-provenance/v1"
    )
    assert statement["predicate"] == {
        "prevCommit": facts().old_oid,
        "repoUri": "acme/gadgets",
        "activityType": "governed_write",
        "actor": "demo-worker",
        "branch": "refs/heads/agent/gadgets",
        "createdOn": "2026-12-01T16:05:20.900Z",
    }
    Statement.copy_from_pb(json_format.ParseDict(statement, statement_pb2.Statement())).validate()


def test_an_unnamed_reviewer_is_named_by_its_review_run() -> None:
    statement = plain(review_statement(facts(reviewer=None)))
    assert statement["predicate"]["verifier"]["id"] == (
        "https://aios-ledger.dev/reviews/review:task-gadget-docs:2:1"
    )


def test_an_envelope_opens_only_with_its_key_and_intact() -> None:
    keyid = KEYID
    envelope = sign_envelope(provenance_statement(facts()), KEY.sign, keyid)
    assert open_envelope(envelope, PUBLIC, check, keyid)["predicateType"] == (
        "https://slsa.dev/provenance/v1"
    )
    other = Ed25519PrivateKey.from_private_bytes(bytes(32)).public_key().public_bytes_raw()
    cases: list[Any] = [
        (envelope, other),
        ({**envelope, "payloadType": "text/plain"}, PUBLIC),
        ({**envelope, "signatures": []}, PUBLIC),
        ({**envelope, "payload": base64.b64encode(b'{"x":1}').decode()}, PUBLIC),
        ("not an envelope", PUBLIC),
        ({**envelope, "payload": "%%%"}, PUBLIC),
    ]
    for candidate, key in cases:
        with pytest.raises(LedgerError) as refused:
            open_envelope(candidate, key, check)
        assert refused.value.code == "ATTESTATION_INVALID"


def test_the_statements_and_envelopes_are_golden(golden: SnapshotAssertion) -> None:
    note = attestation_note(facts(), KEY.sign, KEYID)
    assert note["schema"] == NOTE_SCHEMA
    assert {
        "provenance": provenance_statement(facts()),
        "review": review_statement(facts()),
        "source_provenance": source_provenance_statement(facts()),
        "source_summary": source_summary_statement(facts(), "5a" * 32, "7e" * 32),
        "note": note,
    } == golden


def test_recording_an_attestation_seals_one_event(golden: SnapshotAssertion) -> None:
    note = attestation_note(facts(), KEY.sign, KEYID)
    state = AttestState(write=write_row(), prior=None, tail=empty_tail())
    plan = decide_attest_commit(
        state, AttestRequest("w-task-gadget-docs", note), now=NOW, actor=ACTOR
    )
    assert isinstance(plan, WritePlan)
    assert [appended.event.event_type for appended in plan.events] == [COMMIT_ATTESTED]
    assert plan.response["attested"] and plan.response["commit_oid"] == COMMIT
    assert {
        "response": plan.response,
        "payload": json.loads(plan.events[0].event.payload_json),
        "writes": [w.statement.value for w in plan.writes],
    } == golden


def test_only_a_landed_write_of_the_same_commit_is_attested() -> None:
    note = attestation_note(facts(), KEY.sign, KEYID)
    moved = AttestState(write=write_row(state="MOVED_BY_OTHER"), prior=None, tail=empty_tail())
    with pytest.raises(LedgerError, match="WRITE_NOT_APPLIED"):
        decide_attest_commit(moved, AttestRequest("w-task-gadget-docs", note), now=NOW, actor=ACTOR)
    elsewhere = AttestState(write=write_row(new_oid="f" * 40), prior=None, tail=empty_tail())
    with pytest.raises(LedgerError, match="ATTESTATION_SUBJECT_MISMATCH"):
        decide_attest_commit(
            elsewhere, AttestRequest("w-task-gadget-docs", note), now=NOW, actor=ACTOR
        )
    missing = AttestState(write=None, prior=None, tail=empty_tail())
    with pytest.raises(LedgerError, match="WRITE_NOT_FOUND"):
        decide_attest_commit(
            missing, AttestRequest("w-task-gadget-docs", note), now=NOW, actor=ACTOR
        )


def test_an_attested_write_replays_its_first_attestation() -> None:
    note = attestation_note(facts(), KEY.sign, KEYID)
    state = AttestState(write=write_row(), prior=None, tail=empty_tail())
    plan = decide_attest_commit(
        state, AttestRequest("w-task-gadget-docs", note), now=NOW, actor=ACTOR
    )
    assert isinstance(plan, WritePlan)
    row = plan.writes[0].params
    from aios_ledger.core.attest import CommitAttestationRow

    prior = CommitAttestationRow.from_row(row)
    replayed = decide_attest_commit(
        AttestState(write=write_row(), prior=prior, tail=empty_tail()),
        AttestRequest("w-task-gadget-docs", {}),
        now=NOW,
        actor=ACTOR,
    )
    assert isinstance(replayed, Replay)
    assert replayed.response == {**plan.response, "idempotent": True}


def test_a_source_summary_is_checked_against_its_note() -> None:
    """The Source VSA's levels are answered only when it rests on the note's own source
    provenance and review, and claims two-party review only for a reviewer who is not the
    actor that moved the branch."""
    from aios_ledger.core.attest.statements import check_source_summary

    def checked(changes: dict[str, Any], *, actor: str | None = None) -> list[str]:
        made = facts(**changes)
        source = source_provenance_statement(made)
        if actor is not None:
            source = {**source, "predicate": {**plain(source["predicate"]), "actor": actor}}
        return check_source_summary(
            plain(source_summary_statement(made, "5a" * 32, "7e" * 32)),
            source,
            review_statement(made),
            source_provenance_digest="5a" * 32,
            review_digest="7e" * 32,
        )

    assert checked({}) == ["SLSA_SOURCE_LEVEL_1", "SLSA_SOURCE_TWO_PARTY_REVIEWED"]
    assert checked({"reviewer": None}) == ["SLSA_SOURCE_LEVEL_1"]
    with pytest.raises(LedgerError, match="names no reviewer other than the actor"):
        checked({}, actor="demo-reviewer")
    made = facts()
    summary = plain(source_summary_statement(made, "5a" * 32, "7e" * 32))
    with pytest.raises(LedgerError, match="does not rest on"):
        check_source_summary(
            summary,
            source_provenance_statement(made),
            review_statement(made),
            source_provenance_digest="00" * 32,
            review_digest="7e" * 32,
        )
    summary["predicate"]["verifiedLevels"] = ["SLSA_SOURCE_LEVEL_1", "SLSA_SOURCE_LEVEL_2"]
    with pytest.raises(LedgerError, match="not exactly one source level"):
        check_source_summary(
            summary,
            source_provenance_statement(made),
            review_statement(made),
            source_provenance_digest="5a" * 32,
            review_digest="7e" * 32,
        )
