"""The key that attests governed writes: the checkpoints' Ed25519 signer key, so one key signs
both. Without one configured, a write lands unattested and says so.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.attest.dsse import note_key_id
from aios_ledger.core.proofs import VerifierKey
from aios_ledger.shell.proofs.keys import (
    Signer,
    credential_path,
    generate_signer_key,
    read_key_file,
    signer_from_key,
)

KEY_ENV = "AIOS_LEDGER_ATTEST_KEY"
CREDENTIAL_NAME = "attest-key"


@attrs.frozen
class SigningKey:
    """A loaded signer key and its signer-key text (for writing a new key to a file)."""

    signer: Signer
    text: str = attrs.field(repr=False)

    @property
    def keyid(self) -> str:
        verifier = self.signer.verifier
        return note_key_id(verifier.name, verifier.public_key)

    def sign(self, message: bytes) -> bytes:
        return self.signer.sign(message)

    def signer_text(self) -> str:
        return self.text

    def verifier_text(self) -> str:
        return self.signer.verifier.text()


def generate_key(name: str) -> SigningKey:
    """A new Ed25519 signer key named `name` (a note key name: no spaces, no '+')."""
    key = generate_signer_key(name)
    return SigningKey(signer_from_key(key), key.text())


def load_signer(path: str | os.PathLike[str]) -> SigningKey:
    """The signer key in the file (KEY_FILE_UNREADABLE, NOTE_KEY_INVALID)."""
    signer = read_key_file(Path(path))
    return SigningKey(signer, Path(path).read_text(encoding="ascii").strip())


def read_verifier(text_or_path: str) -> VerifierKey:
    """A verifier key given as its text, or as a file holding it (NOTE_KEY_INVALID)."""
    candidate = Path(text_or_path)
    if "+" in text_or_path and not candidate.is_file():
        return VerifierKey.parse(text_or_path)
    try:
        return VerifierKey.parse(candidate.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as failed:
        raise LedgerError(
            "NOTE_KEY_INVALID", f"cannot read the verifier key {text_or_path[:200]}: {failed}"
        ) from None


def configured_key_path(option: str | os.PathLike[str] | None) -> str | None:
    """Where the signing key is: the option, else the environment, else a systemd credential."""
    if option:
        return os.fspath(option)
    if os.environ.get(KEY_ENV):
        return os.environ[KEY_ENV]
    credential = credential_path(CREDENTIAL_NAME)
    if credential is not None and credential.is_file():
        return str(credential)
    return None
