"""Attestations of governed commits, purely: in-toto Statements v1 (SLSA Provenance v1 of the
change, a SLSA Verification Summary Attestation v1 of its review) in DSSE envelopes signed with
Ed25519, the git note that carries them, and the decision that records them."""

import typing

if typing.TYPE_CHECKING:
    from aios_ledger.core.attest.decisions import (
        AttestationAnswer,
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
    )

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
    "AttestRequest",
]

if not typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Each public name, loaded on first use (PEP 562): the core's modules import each
        other's across its subpackages, so a package that imported all of its modules as it is
        imported would close import cycles. The imports above, for type checkers, are these."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from aios_ledger.core.attest.decisions import (  # noqa: F401
            AttestationAnswer,
            AttestRequest,
            AttestState,
            attestation_note,
            decide_attest_commit,
        )
        from aios_ledger.core.attest.dsse import note_key_id, open_envelope, pae, sign_envelope  # noqa: F401
        from aios_ledger.core.attest.records import CommitAttestationRow  # noqa: F401
        from aios_ledger.core.attest.statements import (  # noqa: F401
            CommitFacts,
            provenance_statement,
            review_statement,
        )

        loaded = locals()
        globals().update({export: loaded[export] for export in __all__})
        return loaded[name]

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
