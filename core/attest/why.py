"""What `why COMMIT` tells a person, checking what the document alone can prove: the attested note
and each inclusion proof."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
from aios_ledger.core.actors import actor_label_of
from aios_ledger.core.digests import sha256_hex
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.git.pull_requests import recorded_pull_request
from aios_ledger.core.log.merkle import InclusionProof

SHORT_OID = 12  # as `git log --abbrev=12` shows a commit
SHORT_DIGEST = 16
NO_COMMIT = "0" * 40


@attrs.frozen
class WhySummary:
    """Per landed write that moved a branch to the commit, its labelled lines."""

    commit: str
    writes: tuple[tuple[tuple[str, str], ...], ...]

    def public(self) -> dict[str, Any]:
        return {"commit": self.commit, "writes": [[list(line) for line in w] for w in self.writes]}


def _short(oid: Any, length: int = SHORT_OID) -> str:
    return str(oid)[:length] if oid else "-"


def _digest(value: Any) -> str:
    """A digest shortened for reading: its kind, if it names one, and its first hex digits."""
    text = str(value or "")
    kind, colon, hexits = text.rpartition(":")
    return f"{kind}{colon}{hexits[:SHORT_DIGEST]}…" if len(hexits) > SHORT_DIGEST else text or "-"


def _task(write: Mapping[str, Any], _: Mapping[str, Any]) -> str:
    task = write.get("task") or {}
    return f"{task.get('task_id')}, attempt {task.get('attempt')}"


def _agent(write: Mapping[str, Any], _: Mapping[str, Any]) -> str:
    agent = write.get("agent")
    if agent is None:
        return "none recorded"
    claim = write.get("claim")
    return f"{agent} (claimed it at {claim['created_at']})" if claim else str(agent)


def _reviewer(write: Mapping[str, Any], _: Mapping[str, Any]) -> str:
    verdict = write.get("verdict") or {}
    reviewer = verdict.get("reviewer")
    named = str(reviewer) if reviewer else "not named in the verdict"
    if "verified_by" in verdict:
        named += f", verdict given by {actor_label_of(verdict['verified_by'])}"
    runs = write.get("auxiliary_review") or []
    if not runs:
        return named
    states = ", ".join(str(run.get("state")) for run in runs)
    return f"{named}; {len(runs)} auxiliary review run(s): {states}"


def _verdict(write: Mapping[str, Any], _: Mapping[str, Any]) -> str:
    verdict = write.get("verdict") or {}
    text = f"{verdict.get('decision')} at {verdict.get('verified_at')}"
    return f"{text}: {verdict['reason']}" if verdict.get("reason") else text


def _write(write: Mapping[str, Any], _: Mapping[str, Any]) -> str:
    landed = write.get("governed_write") or {}
    old = landed.get("old_oid")
    before = "new branch" if old in (None, NO_COMMIT) else _short(old)
    files = len(landed.get("changed_files") or ())
    url = write.get("repository_url")
    where = f"{write.get('repository')}" + (f" ({url})" if url else "")
    return (
        f"{where} {write.get('ref')}: {before} -> {_short(landed.get('new_oid'))}"
        f", {landed.get('state')} at {landed.get('applied_at')}, {files} file(s) changed"
    )


def _attestation(write: Mapping[str, Any], _: Mapping[str, Any]) -> str:
    attested = write.get("attestation")
    if not attested:
        return "none: the write landed unattested"
    note = attested.get("note") or {}
    digests = (attested.get("provenance_sha256"), attested.get("review_sha256"))
    held = (sha256_hex(note.get("provenance")), sha256_hex(note.get("review")))
    sealed = digests in {
        (event["payload"].get("provenance_sha256"), event["payload"].get("review_sha256"))
        for event in write.get("events") or ()
        if event.get("type") == "COMMIT_ATTESTED" and isinstance(event.get("payload"), dict)
    }
    verdict = (
        "the note matches its sealed COMMIT_ATTESTED event"
        if sealed and held == digests
        else "NOT VERIFIED: the note differs from the digests its sealed event names"
    )
    return (
        f"provenance sha256:{_digest(digests[0])} review sha256:{_digest(digests[1])}, "
        f"signed by key {attested.get('keyid')}; {verdict}"
    )


def _signature(write: Mapping[str, Any], document: Mapping[str, Any]) -> str | None:
    if not write.get("attestation"):
        return None
    return (
        f"check it from the repository: aios-ledger verify-attestation "
        f"{_short(document.get('commit'))} --repo PATH --key PUB"
    )


def _proven(proof: Mapping[str, Any], event: Mapping[str, Any] | None, root: bytes) -> bool:
    if event is None or proof.get("seal") != event.get("seal"):
        return False
    try:
        InclusionProof.from_mapping(proof).check(root)
    except LedgerError:
        return False
    return True


def _inclusion(write: Mapping[str, Any], document: Mapping[str, Any]) -> str:
    head = document.get("tree_head") or {}
    events = {event.get("event_id"): event for event in write.get("events") or ()}
    try:
        root = bytes.fromhex(str(head.get("root")))
    except ValueError:
        root = b""
    proofs = write.get("inclusion_proofs") or []
    failed = [
        str(proof.get("event_id"))
        for proof in proofs
        if not _proven(proof, events.get(proof.get("event_id")), root)
    ]
    unproven = len(events) - len(proofs)
    text = (
        f"{len(proofs) - len(failed)} of {len(events)} events proven included in the log of "
        f"{head.get('size')} entries (root {_digest(head.get('root'))})"
    )
    if failed:
        text += f"; NOT VERIFIED: the proofs of event(s) {', '.join(failed)} fail"
    if unproven > 0:
        text += f"; {unproven} event(s) without a proof"
    return text


def _checkpoint(_: Mapping[str, Any], document: Mapping[str, Any]) -> str:
    checkpoint = document.get("checkpoint")
    if not checkpoint:
        return "none signed covers these events yet: run `aios-ledger checkpoint`, then ask again"
    head = document.get("tree_head") or {}
    same = checkpoint.get("root") == head.get("root") and checkpoint.get("size") == head.get("size")
    against = "the proofs are against its root" if same else "NOT the root of the proofs"
    return (
        f"{checkpoint.get('origin')} at size {checkpoint.get('size')}, signed at "
        f"{checkpoint.get('signed_at')} by key {checkpoint.get('key_id')}; {against}"
    )


def _pull_request(write: Mapping[str, Any], _: Mapping[str, Any]) -> str | None:
    """The write's pull request as its last sealed event records it (None: it opened none)."""
    key = (write.get("governed_write") or {}).get("idempotency_key")
    recorded = recorded_pull_request(write.get("events") or (), str(key))
    if recorded is None:
        return None
    where = f"{recorded.get('forge')} {recorded.get('project')} {recorded.get('head')} -> "
    where += str(recorded.get("base"))
    if recorded["state"] == "OPENED":
        adopted = ", an open one adopted" if recorded.get("adopted") else ""
        return f"#{recorded.get('number')} {recorded.get('url')} ({where}{adopted})"
    return (
        f"NOT OPENED ({where}): {recorded.get('code')} {recorded.get('message')}; retry: "
        f"{recorded.get('retry')}"
    )


# The lines of a write's summary: a label and what it says (None: left out).
def _written_by(write: Mapping[str, Any], _: Mapping[str, Any]) -> str | None:
    moved = write.get("governed_write") or {}
    return actor_label_of(moved["written_by"]) if "written_by" in moved else None


WHY_LINES: tuple[tuple[str, Callable[[Mapping[str, Any], Mapping[str, Any]], str | None]], ...] = (
    ("task", _task),
    ("agent", _agent),
    ("reviewer", _reviewer),
    ("verdict", _verdict),
    ("write", _write),
    ("written by", _written_by),
    ("pull request", _pull_request),
    ("attestation", _attestation),
    ("signature", _signature),
    ("inclusion", _inclusion),
    ("checkpoint", _checkpoint),
)


def why_summary(document: Mapping[str, Any]) -> WhySummary:
    """The summary of a why document (`why_commit`'s answer) for a person."""
    return WhySummary(
        commit=str(document.get("commit")),
        writes=tuple(
            tuple(
                (label, text)
                for label, line in WHY_LINES
                if (text := line(write, document)) is not None
            )
            for write in document.get("writes") or ()
        ),
    )
