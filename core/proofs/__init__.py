"""Signed checkpoints: C2SP signed notes, tlog-checkpoints, cosignatures/v1 and the witness."""

import typing

if typing.TYPE_CHECKING:
    from aios_ledger.core.proofs.checkpoints import (
        Checkpoint,
        CosignPlan,
        CosignRequest,
        OpenedCheckpoint,
        WitnessState,
        checkpoint_message,
        consistency_proof_needed,
        cosignature,
        cosignature_message,
        cosignature_time,
        cosigned_note,
        decide_cosign,
        open_checkpoint,
        signed_checkpoint,
        verified_cosignatures,
    )
    from aios_ledger.core.proofs.notes import (
        COSIGNATURE_V1,
        ED25519,
        NoteSignature,
        OpenedNote,
        SignatureCheck,
        SignedNote,
        SignerKey,
        VerifierKey,
        ed25519_signature,
        open_note,
        parse_note,
    )

__all__ = [
    "Checkpoint",
    "CosignPlan",
    "OpenedCheckpoint",
    "WitnessState",
    "checkpoint_message",
    "consistency_proof_needed",
    "cosignature",
    "cosignature_message",
    "cosignature_time",
    "cosigned_note",
    "decide_cosign",
    "open_checkpoint",
    "signed_checkpoint",
    "verified_cosignatures",
    "COSIGNATURE_V1",
    "ED25519",
    "NoteSignature",
    "OpenedNote",
    "SignatureCheck",
    "SignedNote",
    "SignerKey",
    "VerifierKey",
    "ed25519_signature",
    "open_note",
    "parse_note",
    "CosignRequest",
]

if not typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Each public name, loaded on first use (PEP 562): the core's modules import each
        other's across its subpackages, so a package that imported all of its modules as it is
        imported would close import cycles. The imports above, for type checkers, are these."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from aios_ledger.core.proofs.checkpoints import (  # noqa: F401
            Checkpoint,
            CosignPlan,
            CosignRequest,
            OpenedCheckpoint,
            WitnessState,
            checkpoint_message,
            consistency_proof_needed,
            cosignature,
            cosignature_message,
            cosignature_time,
            cosigned_note,
            decide_cosign,
            open_checkpoint,
            signed_checkpoint,
            verified_cosignatures,
        )
        from aios_ledger.core.proofs.notes import (  # noqa: F401
            COSIGNATURE_V1,
            ED25519,
            NoteSignature,
            OpenedNote,
            SignatureCheck,
            SignedNote,
            SignerKey,
            VerifierKey,
            ed25519_signature,
            open_note,
            parse_note,
        )

        loaded = locals()
        globals().update({export: loaded[export] for export in __all__})
        return loaded[name]

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
