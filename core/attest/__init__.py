"""Attestations of governed commits, purely: in-toto Statements in DSSE envelopes signed with
Ed25519, the git note that carries them, and the decision that records them."""

from aios_ledger.core.attest.decisions import (
    AttestRequest,
    AttestState,
    attestation_note,
    decide_attest_commit,
)
from aios_ledger.core.attest.dsse import note_key_id, open_envelope, pae, sign_envelope
from aios_ledger.core.attest.records import CommitAttestationRow
from aios_ledger.core.attest.statements import (
    CommitFacts,
    provenance_statement,
    review_statement,
    source_provenance_statement,
    source_summary_statement,
)
from aios_ledger.core.git.answers import AttestationAnswer

__all__ = [
    "AttestationAnswer",
    "AttestState",
    "attestation_note",
    "decide_attest_commit",
    "note_key_id",
    "open_envelope",
    "pae",
    "sign_envelope",
    "CommitAttestationRow",
    "CommitFacts",
    "provenance_statement",
    "review_statement",
    "source_provenance_statement",
    "source_summary_statement",
    "AttestRequest",
]
