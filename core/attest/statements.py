"""The in-toto Statements of a landed governed write (SLSA Provenance and VSA v1, and the SLSA
Source track's source provenance and Source VSA), arranged from the shell's facts so that the
same facts give the same statements."""

from __future__ import annotations

import attrs
from aios_ledger.core.digests import sha256_hex
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PROVENANCE_TYPE = "https://slsa.dev/provenance/v1"
VSA_TYPE = "https://slsa.dev/verification_summary/v1"
LEDGER_URI = "https://aios-ledger.dev"
BUILD_TYPE = f"{LEDGER_URI}/governed-write/v1"
REVIEW_POLICY_URI = f"{LEDGER_URI}/policy/review/v1"
# A passed review vouches for no SLSA build level: the build ran on an agent's machine.
PASSED_LEVELS = ("SLSA_BUILD_LEVEL_1",)
FAILED_LEVELS = ("FAILED",)
PASSING_DECISIONS = frozenset({"SUCCEEDED"})


@attrs.frozen
class CommitFacts:
    """What the ledger knows of a commit a governed write landed (None where not recorded)."""

    repository: str
    branch: str
    ref: str
    commit_oid: str
    base_oid: str
    old_oid: str
    write_key: str
    task_id: str
    attempt: int
    agent_id: str | None
    capabilities: tuple[str, ...]
    envelope: JsonObject
    execution_digest: str
    evidence_digest: str | None
    proposal_id: str
    bundle_sha256: str
    result_digest: str | None
    changed_files: tuple[str, ...]
    started_on: str | None
    finished_on: str | None
    applied_on: str
    decision: str
    reason: str | None
    verified_on: str | None
    reviewer: str | None
    review_id: str | None
    review_output_digest: str | None
    success_criteria: JsonValue
    governance: JsonObject
    ledger_version: str
    repository_url: str | None = None

    @property
    def invocation_id(self) -> str:
        return f"{self.task_id}@{self.attempt}"

    @property
    def subject_name(self) -> str:
        return f"{self.repository}@{self.branch}"

    @property
    def repository_uri(self) -> str:
        """The repository as the source statements name it: its remote's URL when it has one."""
        return self.repository_url or self.repository

    @property
    def resource_uri(self) -> str:
        """The commit, as a VSA's resourceUri names it (SPDX's git download location)."""
        return f"git+{self.repository}@{self.commit_oid}"


def _digest_set(prefixed: str) -> dict[str, JsonValue]:
    algorithm, _, value = prefixed.partition(":")
    return {algorithm: value} if value else {"sha256": prefixed}


def subject(facts: CommitFacts) -> JsonObject:
    return {"name": facts.subject_name, "digest": {"gitCommit": facts.commit_oid}}


def _statement(subject: JsonObject, predicate_type: str, predicate: JsonObject) -> JsonObject:
    return {
        "_type": STATEMENT_TYPE,
        "subject": [subject],
        "predicateType": predicate_type,
        "predicate": predicate,
    }


def _without_none(mapping: dict[str, JsonValue]) -> JsonObject:
    return {key: value for key, value in mapping.items() if value is not None}


def provenance_statement(facts: CommitFacts) -> JsonObject:
    """SLSA Provenance v1 of the commit, built by the agent's attempt under the ledger."""
    dependencies: list[JsonValue] = [
        {"uri": f"git+{facts.repository}", "name": "base", "digest": {"gitCommit": facts.base_oid}}
    ]
    if facts.evidence_digest is not None:
        dependencies.append(
            {
                "name": f"evidence:{facts.invocation_id}",
                "uri": f"{LEDGER_URI}/runs/{facts.invocation_id}",
                "digest": _digest_set(facts.evidence_digest),
            }
        )
    byproducts: list[JsonValue] = [
        {"name": path, "annotations": {"change": "modified-or-added"}}
        for path in facts.changed_files
    ]
    byproducts.append(
        {
            "name": f"bundle:{facts.proposal_id}",
            "mediaType": "application/x-git-bundle",
            "digest": {"sha256": facts.bundle_sha256},
        }
    )
    builder = f"{LEDGER_URI}/builders/worker/{facts.agent_id or 'unknown'}"
    predicate: JsonObject = {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": {
                "envelope": facts.envelope,
                "envelopeDigest": facts.execution_digest,
            },
            "internalParameters": _without_none(
                {
                    "task": facts.task_id,
                    "attempt": facts.attempt,
                    "agent": facts.agent_id,
                    "capabilities": list[JsonValue](facts.capabilities),
                    "repository": facts.repository,
                    "ref": facts.ref,
                    "oldOid": facts.old_oid,
                    "writeKey": facts.write_key,
                    "resultDigest": facts.result_digest,
                }
            ),
            "resolvedDependencies": dependencies,
        },
        "runDetails": {
            "builder": {
                "id": builder,
                "version": {"aios-ledger": facts.ledger_version},
                "builderDependencies": [
                    {
                        "uri": LEDGER_URI,
                        "name": "aios-ledger",
                        "annotations": {"version": facts.ledger_version},
                    }
                ],
            },
            "metadata": _without_none(
                {
                    "invocationId": facts.invocation_id,
                    "startedOn": facts.started_on,
                    "finishedOn": facts.finished_on,
                }
            ),
            "byproducts": byproducts,
        },
    }
    return _statement(subject(facts), PROVENANCE_TYPE, predicate)


def _input(path: str, sha256: str) -> JsonValue:
    """An attestation a VSA rests on: the ledger's URI of it and its digest."""
    return {"uri": f"{LEDGER_URI}/{path}", "digest": {"sha256": sha256}}


def _review_inputs(facts: CommitFacts, provenance_digest: str | None) -> list[JsonValue]:
    """The provenance, and the review run when the verifier is a named reviewer."""
    inputs: list[JsonValue] = []
    if provenance_digest is not None:
        inputs.append(_input(f"commits/{facts.commit_oid}/provenance", provenance_digest))
    output = facts.review_output_digest
    if facts.reviewer is not None and facts.review_id is not None and output is not None:
        inputs.append(_input(f"reviews/{facts.review_id}", output.removeprefix("sha256:")))
    return inputs


def review_statement(facts: CommitFacts, provenance_digest: str | None = None) -> JsonObject:
    """SLSA VSA v1 of the review: PASSED when the verdict was SUCCEEDED."""
    passed = facts.decision in PASSING_DECISIONS
    policy = {"success_criteria": facts.success_criteria, "governance": facts.governance}
    verifier = (
        f"{LEDGER_URI}/reviewers/{facts.reviewer}"
        if facts.reviewer is not None
        else f"{LEDGER_URI}/reviews/{facts.review_id or facts.invocation_id}"
    )
    predicate: JsonObject = {
        # No `verifier.version`: the VSA proto readers check with refuses it.
        "verifier": {"id": verifier},
        "timeVerified": facts.verified_on or facts.applied_on,
        "resourceUri": facts.resource_uri,
        "policy": {"uri": REVIEW_POLICY_URI, "digest": {"sha256": sha256_hex(policy)}},
        "inputAttestations": _review_inputs(facts, provenance_digest),
        "verificationResult": "PASSED" if passed else "FAILED",
        "verifiedLevels": list[JsonValue](PASSED_LEVELS if passed else FAILED_LEVELS),
        "slsaVersion": "1.0",
    }
    return _statement(subject(facts), VSA_TYPE, predicate)


def statement_subject_commit(statement: JsonObject) -> str | None:
    """The commit a Statement is about: its one subject's `gitCommit` digest (None: not one)."""
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        return None
    digest = subjects[0].get("digest")
    if not isinstance(digest, dict):
        return None
    commit = digest.get("gitCommit")
    return commit if isinstance(commit, str) else None


# SLSA leaves source provenance to each source control system; the ledger writes the predicate
# of SLSA's own source-tool (slsa-framework/protos, sourcetool/v1), so its readers parse it.
SOURCE_PROVENANCE_TYPE = "https://github.com/slsa-framework/source-tool/source-provenance/v1"
SOURCE_ACTIVITY = "governed_write"
SOURCE_VERIFIER_URI = f"{LEDGER_URI}/verifiers/source"
SOURCE_POLICY_URI = f"{LEDGER_URI}/policy/source/v1"
SOURCE_SLSA_VERSION = "1.2"
# The ledger vouches for the changes it lands, not for pushes made around it: Source Level 2
# and up ask continuity and history of every change to the branch.
SOURCE_LEVEL = "SLSA_SOURCE_LEVEL_1"
SOURCE_LEVEL_PREFIX = "SLSA_SOURCE_LEVEL_"
TWO_PARTY_REVIEWED = "SLSA_SOURCE_TWO_PARTY_REVIEWED"
REVIEWER_PREFIX = f"{LEDGER_URI}/reviewers/"


def source_provenance_statement(facts: CommitFacts) -> JsonObject:
    """Source provenance of the branch's move to the commit, made as the ledger moved it."""
    predicate = _without_none(
        {
            "prevCommit": facts.old_oid,
            "repoUri": facts.repository_uri,
            "activityType": SOURCE_ACTIVITY,
            "actor": facts.agent_id,
            "branch": facts.ref,
            "createdOn": facts.applied_on,
        }
    )
    return _statement(subject(facts), SOURCE_PROVENANCE_TYPE, predicate)


def source_levels(facts: CommitFacts) -> tuple[str, ...]:
    """Two-party review: a named reviewer other than the agent that made the change passed it."""
    if facts.decision not in PASSING_DECISIONS:
        return FAILED_LEVELS
    if facts.reviewer is not None and facts.agent_id not in (None, facts.reviewer):
        return (SOURCE_LEVEL, TWO_PARTY_REVIEWED)
    return (SOURCE_LEVEL,)


def source_summary_statement(
    facts: CommitFacts, source_provenance_digest: str, review_digest: str
) -> JsonObject:
    """The Source VSA of the commit: the source level the ledger asserts, and two-party review
    when the reviewer is not the agent; its inputs are the source provenance and the review."""
    inputs = [
        _input(f"commits/{facts.commit_oid}/source-provenance", source_provenance_digest),
        _input(f"commits/{facts.commit_oid}/review", review_digest),
    ]
    passed = facts.decision in PASSING_DECISIONS
    predicate: JsonObject = {
        "verifier": {"id": SOURCE_VERIFIER_URI},
        "timeVerified": facts.applied_on,
        "resourceUri": f"git+{facts.repository_uri}",
        "policy": {"uri": SOURCE_POLICY_URI},
        "inputAttestations": inputs,
        "verificationResult": "PASSED" if passed else "FAILED",
        "verifiedLevels": list[JsonValue](source_levels(facts)),
        "slsaVersion": SOURCE_SLSA_VERSION,
    }
    revision: JsonObject = {**subject(facts), "annotations": {"sourceRefs": [facts.ref]}}
    return _statement(revision, VSA_TYPE, predicate)


def _predicate(statement: JsonObject) -> JsonObject:
    predicate = statement.get("predicate")
    if not isinstance(predicate, dict):
        raise LedgerError("ATTESTATION_INVALID", "a Statement has no predicate object")
    return predicate


def check_source_summary(
    summary: JsonObject,
    source_provenance: JsonObject,
    review: JsonObject,
    *,
    source_provenance_digest: str,
    review_digest: str,
) -> list[str]:
    """The levels a Source VSA asserts, once it is shown to rest on the note's own source
    provenance and review, to assert one source level, and to claim two-party review only when
    the review's named reviewer is not the actor that moved the branch."""
    predicate = _predicate(summary)
    inputs = predicate.get("inputAttestations")
    digests = set()
    for item in inputs if isinstance(inputs, list) else []:
        digest = item.get("digest") if isinstance(item, dict) else None
        if isinstance(digest, dict) and isinstance(digest.get("sha256"), str):
            digests.add(digest["sha256"])
    if not {source_provenance_digest, review_digest} <= digests:
        raise LedgerError(
            "ATTESTATION_INVALID",
            "the source summary does not rest on this note's source provenance and review",
        )
    levels = predicate.get("verifiedLevels")
    if not isinstance(levels, list) or not all(isinstance(level, str) for level in levels):
        raise LedgerError(
            "ATTESTATION_INVALID", "the source summary's verifiedLevels are not a list of strings"
        )
    names = [str(level) for level in levels]
    asserted = [name for name in names if name.startswith(SOURCE_LEVEL_PREFIX)]
    if predicate.get("verificationResult") == "PASSED" and len(asserted) != 1:
        raise LedgerError(
            "ATTESTATION_INVALID", "the source summary asserts not exactly one source level"
        )
    if TWO_PARTY_REVIEWED in names:
        verifier = _predicate(review).get("verifier")
        verifier_id = verifier.get("id") if isinstance(verifier, dict) else None
        reviewer = (
            verifier_id.removeprefix(REVIEWER_PREFIX)
            if isinstance(verifier_id, str) and verifier_id.startswith(REVIEWER_PREFIX)
            else None
        )
        actor = _predicate(source_provenance).get("actor")
        if reviewer is None or not isinstance(actor, str) or reviewer == actor:
            raise LedgerError(
                "ATTESTATION_INVALID",
                f"{TWO_PARTY_REVIEWED} is claimed, but the review names no reviewer other than "
                "the actor",
            )
    return names
