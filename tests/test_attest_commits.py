"""Attested governed writes on real repositories: a landed write signed, sealed and attached as
a git note that `verify-attestation` checks from the repository alone (on SQLite and
PostgreSQL); a write without a key still lands and says so; every kind of tampering caught (an
envelope edited, a note moved to another commit, a note rewritten in the repository, a note
signed by another key, none at all); `why COMMIT` back to the task, from the library, the CLI
and the HTTP route."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.attest.decisions import NOTE_PARTS, NOTES_REF
from aios_ledger.core.attest.statements import SOURCE_PROVENANCE_TYPE
from aios_ledger.core.proofs import VerifierKey
from aios_ledger.shell.attest.commits import (
    add_note,
    read_note,
    verify_commit_attestation,
    why_commit,
)
from aios_ledger.shell.attest.keys import SigningKey, generate_key
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV
from aios_ledger.shell.governed.writes import governed_write
from aios_ledger.shell.log.verification import verify_log
from cli_runner import CliResult, run_cli
from conftest import ENGINES, is_postgres
from git_support import binding, events_of, git, make_repository, register, verified_proposal
from legacy_fixtures import rows

ROOT = Path(__file__).resolve().parents[1]


class Landed:
    def __init__(self, root: Path, target: Path | str) -> None:
        self.root = root
        self.db: Any = target
        self.bare, self.base = make_repository(root)
        self.key = generate_key("ledger.test")
        self.registered = False

    def register(self) -> None:
        if not self.registered:
            register(self.db, self.bare)
            self.registered = True

    def land(
        self,
        task_id: str,
        *,
        key: SigningKey | None = None,
        reviewer: str | None = None,
        **files: str,
    ) -> dict[str, Any]:
        self.register()
        verified_proposal(
            self.db,
            task_id,
            binding(task_id, self.base),
            files or {"src/a.py": "print(1)\n"},
            reviewer=reviewer,
        )
        with Database(self.db) as db:
            return dict(
                governed_write(
                    db, {"task_id": task_id, "idempotency_key": f"w-{task_id}"}, attest_key=key
                )
            )

    def verify(self, commit: str, key: SigningKey | None = None) -> dict[str, Any]:
        verifier = VerifierKey.parse((key or self.key).verifier_text())
        return verify_commit_attestation(str(self.bare), commit, verifier)

    def finding(self, commit: str, key: SigningKey | None = None) -> str:
        try:
            self.verify(commit, key)
        except LedgerError as refused:
            return refused.code
        raise AssertionError("the attestation verified")


@pytest.fixture
def landed(
    tmp_path: Path, ledger_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Landed]:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    found = Landed(tmp_path, ledger_target)
    yield found
    if is_postgres(found.db) or Path(found.db).exists():
        with Database(found.db) as db:
            report = verify_log(db)
        assert report.intact, report.public()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_landed_write_is_attested_sealed_and_verifiable_from_the_repository(
    landed: Landed,
) -> None:
    answer = landed.land("task-a", key=landed.key)
    commit = answer["new_oid"]
    attestation = answer["attestation"]
    assert attestation["attested"] is True and attestation["commit_oid"] == commit
    assert attestation["keyid"] == landed.key.keyid and attestation["notes_ref"] == NOTES_REF
    assert events_of(landed.db, "task-a")[-2:] == ["GOVERNED_WRITE_APPLIED", "COMMIT_ATTESTED"]
    verified = landed.verify(commit)
    assert verified["intact"] and verified["verification_result"] == "PASSED"
    assert verified["provenance"]["predicate"]["runDetails"]["metadata"]["invocationId"] == (
        "task-a@1"
    )
    # The note is a commit of its own notes ref: it travels with a clone that fetches it.
    clone = landed.root / "clone"
    git("clone", "--quiet", "--bare", str(landed.bare), str(clone))
    git("--git-dir", str(clone), "fetch", "--quiet", "origin", f"{NOTES_REF}:{NOTES_REF}")
    verifier = VerifierKey.parse(landed.key.verifier_text())
    assert verify_commit_attestation(str(clone), commit, verifier)["intact"]
    # The same write again replays its attestation: one event, the same note.
    with Database(landed.db) as db:
        again = governed_write(
            db, {"task_id": "task-a", "idempotency_key": "w-task-a"}, attest_key=landed.key
        )
    assert again["attestation"] == {**attestation, "idempotent": True}
    assert events_of(landed.db, "task-a").count("COMMIT_ATTESTED") == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_the_review_summary_names_the_reviewer_sealed_with_the_verdict(landed: Landed) -> None:
    named = landed.land("task-r", key=landed.key, reviewer="alice")
    summary = landed.verify(named["new_oid"])["review"]["predicate"]
    assert summary["verifier"]["id"] == "https://aios-ledger.dev/reviewers/alice"
    # A verdict that names nobody (the local command line's, or one sealed before the name
    # was) is summarised as before: the verifier is the review of the attempt.
    unnamed = landed.land("task-u", key=landed.key, **{"src/u.py": "u = 1\n"})
    summary = landed.verify(unnamed["new_oid"])["review"]["predicate"]
    assert summary["verifier"]["id"] == "https://aios-ledger.dev/reviews/task-u@1"
    verdicts = [
        json.loads(payload)
        for (payload,) in rows(
            landed.db,
            "SELECT payload_json FROM events WHERE event_type = 'TASK_VERIFIED' ORDER BY event_id",
        )
    ]
    assert [verdict.get("reviewer") for verdict in verdicts] == ["alice", None]


def test_the_source_summary_says_two_party_reviewed_only_for_another_reviewer(
    landed: Landed,
) -> None:
    """A named reviewer (never the agent: the ledger refuses self-review) makes the change
    two-party reviewed; a verdict that names nobody does not."""
    levels = {}
    for task, reviewer in (("task-2p", "alice"), ("task-0p", None)):
        commit = landed.land(task, key=landed.key, reviewer=reviewer, **{f"{task}.md": "x\n"})
        verified = landed.verify(commit["new_oid"])
        levels[task] = verified["source_levels"]
        source = verified["source_provenance"]
        assert source["predicateType"] == SOURCE_PROVENANCE_TYPE
        assert source["predicate"]["prevCommit"] == commit["old_oid"]
        assert source["predicate"]["branch"] == commit["ref"]
        summary = verified["source_summary"]
        assert summary["subject"][0]["annotations"] == {"sourceRefs": [commit["ref"]]}
        assert summary["predicate"]["verificationResult"] == "PASSED"
    assert levels == {
        "task-2p": ["SLSA_SOURCE_LEVEL_1", "SLSA_SOURCE_TWO_PARTY_REVIEWED"],
        "task-0p": ["SLSA_SOURCE_LEVEL_1"],
    }


def test_a_note_claiming_two_party_review_it_cannot_show_is_caught(landed: Landed) -> None:
    """Notes signed with the ledger's own key whose Source VSA claims two-party review the review
    does not show, or rests on another source provenance, are refused."""
    key = landed.key
    unnamed = landed.land("task-c", key=key)["new_oid"]
    claimed = resigned(_note(landed, unnamed), key.sign, key.keyid, claim_two_parties=True)
    add_note(str(landed.bare), unnamed, json.dumps(claimed))
    assert landed.finding(unnamed) == "ATTESTATION_INVALID"
    named = landed.land("task-d", key=key, reviewer="alice", **{"d.md": "d\n"})["new_oid"]
    note = _note(landed, named)
    assert landed.verify(named)["source_levels"][-1] == "SLSA_SOURCE_TWO_PARTY_REVIEWED"
    # The reviewer as the actor that moved the branch: one party, not two.
    selfish = resigned(note, key.sign, key.keyid, actor="alice")
    add_note(str(landed.bare), named, json.dumps(selfish))
    assert landed.finding(named) == "ATTESTATION_INVALID"
    # Another source provenance under the original summary.
    swapped = {**note, "source_provenance": selfish["source_provenance"]}
    add_note(str(landed.bare), named, json.dumps(swapped))
    assert landed.finding(named) == "ATTESTATION_INVALID"


def test_a_note_from_before_the_source_track_still_verifies(landed: Landed) -> None:
    commit = landed.land("task-v1", key=landed.key)["new_oid"]
    note = _note(landed, commit)
    older = {"schema": "aios.commit_attestations.v1", "provenance": note["provenance"]}
    add_note(str(landed.bare), commit, json.dumps({**older, "review": note["review"]}))
    verified = landed.verify(commit)
    assert verified["intact"] and verified["source_levels"] is None
    assert "source_summary" not in verified


def test_a_write_without_a_key_lands_and_says_it_is_unattested(landed: Landed) -> None:
    answer = landed.land("task-n")
    assert answer["state"] == "APPLIED"
    assert answer["attestation"]["attested"] is False
    assert "no attestation key configured" in answer["attestation"]["reason"]
    assert "COMMIT_ATTESTED" not in events_of(landed.db, "task-n")
    assert read_note(str(landed.bare), answer["new_oid"]) is None
    assert landed.finding(answer["new_oid"]) == "ATTESTATION_MISSING"
    # The same write later, with a key: attested then.
    with Database(landed.db) as db:
        later = governed_write(
            db, {"task_id": "task-n", "idempotency_key": "w-task-n"}, attest_key=landed.key
        )
    assert later["attestation"]["attested"] is True
    assert landed.verify(answer["new_oid"])["intact"]


def test_a_repository_that_lost_its_note_gets_it_back_from_the_ledger(landed: Landed) -> None:
    commit = landed.land("task-l", key=landed.key)["new_oid"]
    git("--git-dir", str(landed.bare), "update-ref", "-d", NOTES_REF)
    assert landed.finding(commit) == "ATTESTATION_MISSING"
    with Database(landed.db) as db:
        governed_write(
            db, {"task_id": "task-l", "idempotency_key": "w-task-l"}, attest_key=landed.key
        )
    assert landed.verify(commit)["intact"]


def _note(landed: Landed, commit: str) -> dict[str, Any]:
    text = read_note(str(landed.bare), commit)
    assert text is not None
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def resigned(
    note: dict[str, Any],
    sign: Callable[[bytes], bytes],
    keyid: str,
    *,
    actor: str | None = None,
    claim_two_parties: bool = False,
) -> dict[str, Any]:
    """The note's Statements signed again by `sign` (the source provenance's actor changed, or
    two-party review claimed), the Source VSA pointing at the new envelopes."""
    from aios_ledger.core.attest.decisions import unsigned_statement
    from aios_ledger.core.attest.dsse import sign_envelope
    from aios_ledger.core.digests import sha256_hex

    statements: dict[str, Any] = {part: unsigned_statement(note[part]) for part in NOTE_PARTS}
    if actor is not None:
        statements["source_provenance"]["predicate"]["actor"] = actor
    summary = statements.pop("source_summary")
    forged = {part: sign_envelope(s, sign, keyid) for part, s in statements.items()}
    inputs = summary["predicate"]["inputAttestations"]
    inputs[0]["digest"]["sha256"] = sha256_hex(forged["source_provenance"])
    inputs[1]["digest"]["sha256"] = sha256_hex(forged["review"])
    if claim_two_parties:
        summary["predicate"]["verifiedLevels"].append("SLSA_SOURCE_TWO_PARTY_REVIEWED")
    forged["source_summary"] = sign_envelope(summary, sign, keyid)
    return {**note, **forged}


def test_an_edited_envelope_is_caught(landed: Landed) -> None:
    import base64

    commit = landed.land("task-e", key=landed.key)["new_oid"]
    note = _note(landed, commit)
    statement = json.loads(base64.b64decode(note["provenance"]["payload"]))
    statement["predicate"]["runDetails"]["builder"]["id"] = "https://example.com/someone-else"
    note["provenance"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    add_note(str(landed.bare), commit, json.dumps(note))
    assert landed.finding(commit) == "ATTESTATION_INVALID"


def test_a_note_moved_to_another_commit_is_caught(landed: Landed) -> None:
    commit = landed.land("task-m", key=landed.key)["new_oid"]
    add_note(str(landed.bare), landed.base, json.dumps(_note(landed, commit)))
    assert landed.finding(landed.base) == "ATTESTATION_SUBJECT_MISMATCH"
    assert landed.verify(commit)["intact"]


def test_a_note_rewritten_in_the_repository_is_caught(landed: Landed) -> None:
    """Someone with write access to the repository replaces the note: with garbage, with
    another schema, or with envelopes signed by a key of their own."""
    commit = landed.land("task-r", key=landed.key)["new_oid"]
    note = _note(landed, commit)
    add_note(str(landed.bare), commit, "not json")
    assert landed.finding(commit) == "ATTESTATION_INVALID"
    add_note(str(landed.bare), commit, json.dumps({**note, "schema": "other"}))
    assert landed.finding(commit) == "ATTESTATION_INVALID"
    forger = generate_key("ledger.test")
    for keyid in (landed.key.keyid, forger.keyid):  # posing as the ledger's key id, or not
        forged = resigned(note, forger.sign, keyid)
        add_note(str(landed.bare), commit, json.dumps(forged))
        assert landed.finding(commit) == "ATTESTATION_INVALID"
    # ... which the forger's own key verifies: the reader's key is what decides.
    assert landed.verify(commit, forger)["intact"] is True
    # The ledger still holds the real one, and `why` shows it.
    with Database(landed.db) as db:
        why = why_commit(db, commit)
    assert why["writes"][0]["attestation"]["note"] == note


def test_why_goes_from_a_commit_back_to_everything(landed: Landed) -> None:
    commit = landed.land("task-w", key=landed.key, **{"docs/w.md": "w\n"})["new_oid"]
    with Database(landed.db) as db:
        why = why_commit(db, commit)
        with pytest.raises(LedgerError, match="COMMIT_NOT_FOUND"):
            why_commit(db, landed.base)
        with pytest.raises(LedgerError, match="FIELDS_INVALID"):
            why_commit(db, "not-a-commit")
        with pytest.raises(LedgerError, match="COMMIT_NOT_FOUND"):
            why_commit(db, commit, "acme/other")
    [write] = why["writes"]
    assert write["task"]["task_id"] == "task-w" and write["task"]["attempt"] == 1
    assert write["claim"]["type"] == "TASK_CLAIMED"
    assert write["verdict"]["decision"] == "SUCCEEDED"
    assert write["governed_write"]["changed_files"] == ["docs/w.md"]
    assert write["attestation"]["statements"]["review"]["predicateType"] == (
        "https://slsa.dev/verification_summary/v1"
    )
    types = [event["type"] for event in write["events"]]
    assert types[-1] == "COMMIT_ATTESTED" and "TASK_VERIFIED" in types
    assert all(event["seal"] for event in write["events"])
    # Each event's inclusion proof in the Merkle log, checked with the proof's own arithmetic
    # against the one tree head the answer names, as `verify-proof` does offline.
    from aios_ledger.core.log.merkle import InclusionProof

    root = bytes.fromhex(why["tree_head"]["root"])
    proofs = write["inclusion_proofs"]
    assert [proof["event_id"] for proof in proofs] == [e["event_id"] for e in write["events"]]
    for proof in proofs:
        assert proof["tree_size"] == why["tree_head"]["size"]
        InclusionProof.from_mapping(proof).check(root)
        assert proof["seal"] == next(
            e["seal"] for e in write["events"] if e["event_id"] == proof["event_id"]
        )
    assert why["checkpoint"] is None  # none signed yet
    # Once a checkpoint is signed, the proofs are against it, and its note is in the answer:
    # the log's public key checks the note, the note's root each proof.
    from aios_ledger.core.proofs import Checkpoint
    from aios_ledger.core.timestamps import Timestamp
    from aios_ledger.shell.proofs.checkpoints import sign_checkpoint

    with Database(landed.db) as db:
        served = sign_checkpoint(db, landed.key.signer, Timestamp.parse("2026-12-01T00:00:00Z"))
        signed = why_commit(db, commit)
    assert signed["checkpoint"]["note"] == served.note
    assert signed["tree_head"]["size"] == served.row.tree_size
    note_root = Checkpoint.parse(served.row.note.split("\n\n")[0] + "\n").root
    for proof in signed["writes"][0]["inclusion_proofs"]:
        InclusionProof.from_mapping(proof).check(note_root)


def _cli(*args: str) -> CliResult:
    return run_cli(*args, cwd=ROOT)


def test_the_commands_write_attested_and_verify(landed: Landed, tmp_path: Path) -> None:
    landed.register()
    verified_proposal(landed.db, "task-c", binding("task-c", landed.base), {"c.txt": "c\n"})
    key_file = tmp_path / "attest.key"
    key_file.write_text(landed.key.signer_text() + "\n")
    request = tmp_path / "write.json"
    request.write_text('{"idempotency_key": "w-c"}')
    written = _cli(
        "--db",
        str(landed.db),
        "write",
        "task-c",
        "--json",
        str(request),
        "--attest-key",
        str(key_file),
    )
    assert written.returncode == 0, written.stderr
    commit = json.loads(written.stdout)["new_oid"]
    public = landed.key.verifier_text()
    checked = _cli("verify-attestation", commit, "--repo", str(landed.bare), "--key", public)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["intact"] is True
    why = _cli("--db", str(landed.db), "why", commit)
    assert (
        why.returncode == 0 and json.loads(why.stdout)["writes"][0]["task"]["task_id"] == "task-c"
    )
    other = generate_key("ledger.test").verifier_text()
    refused = _cli("verify-attestation", commit, "--repo", str(landed.bare), "--key", other)
    assert refused.returncode != 0 and refused.stderr.startswith("ATTESTATION_INVALID")
    bad_key = _cli("verify-attestation", commit, "--repo", str(landed.bare), "--key", "x+y+z")
    assert bad_key.returncode != 0 and bad_key.stderr.startswith("NOTE_KEY_INVALID")
    # A credential is for a remote URL; a remote URL of another scheme is refused.
    local = ("verify-attestation", commit, "--key", public, "--token-file", str(request))
    misplaced = _cli(*local, "--repo", str(landed.bare))
    assert misplaced.returncode != 0 and misplaced.stderr.startswith("REMOTE_URL_INVALID")
    ftp = _cli(*local, "--repo", "ftp://example.com/r.git")
    assert ftp.returncode != 0 and ftp.stderr.startswith("REMOTE_URL_INVALID")
    # The key from the config file's `[attest] key`, relative to the file; a key file that
    # cannot be read is refused before anything is written.
    verified_proposal(landed.db, "task-k", binding("task-k", landed.base), {"k.txt": "k\n"})
    config = tmp_path / "aios-ledger.toml"
    config.write_text('[attest]\nkey = "missing.key"\n')
    request.write_text('{"idempotency_key": "w-k"}')
    args = ("--config", str(config), "--db", str(landed.db), "write", "task-k", "--json")
    refused = _cli(*args, str(request))
    assert refused.returncode != 0 and refused.stderr.startswith("KEY_FILE_UNREADABLE")
    assert "GOVERNED_WRITE_INTENDED" not in events_of(landed.db, "task-k")
    config.write_text('[attest]\nkey = "attest.key"\n')
    from_config = _cli(*args, str(request))
    assert from_config.returncode == 0, from_config.stderr
    assert json.loads(from_config.stdout)["attestation"]["attested"] is True


def test_the_server_attests_with_its_key_and_answers_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from api_server import ApiServer

    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    landed = Landed(tmp_path, tmp_path / "ledger.sqlite3")
    key_file = tmp_path / "attest.key"
    key_file.write_text(landed.key.signer_text())
    monkeypatch.setenv("AIOS_LEDGER_ATTEST_KEY", str(key_file))
    register(landed.db, landed.bare)
    verified_proposal(landed.db, "task-h", binding("task-h", landed.base), {"h.txt": "h\n"})
    with ApiServer(landed.db, role_tokens=True) as server:
        written = server.client("owner").post(
            "/v1/tasks/task-h/governed-write", json={"idempotency_key": "w-h"}
        )
        assert written.status_code == 200, written.text
        answer = written.json()
        assert answer["attestation"]["attested"] is True
        why = server.client("auditor").get(f"/v1/commits/{answer['new_oid']}")
        assert why.status_code == 200, why.text
        assert why.json()["writes"][0]["attestation"]["keyid"] == landed.key.keyid
        unknown = server.client("auditor").get(f"/v1/commits/{landed.base}")
        assert unknown.status_code == 404 and unknown.json()["code"] == "COMMIT_NOT_FOUND"
        elsewhere = server.client("auditor").get(
            f"/v1/commits/{answer['new_oid']}", params={"repo": "acme/other"}
        )
        assert elsewhere.status_code == 404
    assert landed.verify(answer["new_oid"])["intact"]


def test_writes_landing_at_once_in_one_repository_each_keep_their_note(landed: Landed) -> None:
    """Two writes to two branches of one repository at once: their notes race for the notes
    ref's lock, and each is attached (the loser tries again)."""
    import threading

    landed.register()
    tasks = ("task-p", "task-q", "task-s")
    for task_id in tasks:
        verified_proposal(landed.db, task_id, binding(task_id, landed.base), {f"{task_id}": "x\n"})
    answers: dict[str, Any] = {}

    def write(task_id: str) -> None:
        with Database(landed.db) as db:
            answers[task_id] = governed_write(
                db, {"task_id": task_id, "idempotency_key": f"w-{task_id}"}, attest_key=landed.key
            )

    threads = [threading.Thread(target=write, args=(task_id,)) for task_id in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for task_id in tasks:
        assert answers[task_id]["attestation"]["attested"] is True
        assert answers[task_id]["attestation"]["reason"] is None
        assert landed.verify(answers[task_id]["new_oid"])["intact"]
