"""Ed25519 keys for checkpoints and cosignatures, through `cryptography`. A signer key lives in a
file or a systemd credential, never in the database, so that reading the database is not enough
to sign a checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.config import CheckpointSettings
from aios_ledger.core.proofs import SignerKey, VerifierKey
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

CREDENTIALS_DIRECTORY = "CREDENTIALS_DIRECTORY"
# A key file is a few dozen bytes; anything much larger is not one.
MAX_KEY_FILE_BYTES = 4096


@attrs.frozen(repr=False)
class Signer:
    """A loaded signer key: its verifier key, and the private key that signs."""

    verifier: VerifierKey
    _private: Ed25519PrivateKey

    def __repr__(self) -> str:
        return f"Signer({self.verifier.text()!r})"

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)


def check_ed25519(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """The core's `SignatureCheck`: whether `signature` is `public_key`'s over `message`."""
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def signer_from_key(key: SignerKey) -> Signer:
    private = Ed25519PrivateKey.from_private_bytes(key.seed)
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return Signer(key.verifier(public), private)


def parse_signer(text: str) -> Signer:
    """A signer from its `PRIVATE+KEY+...` text (NOTE_KEY_INVALID)."""
    return signer_from_key(SignerKey.parse(text))


def generate_signer_key(name: str) -> SignerKey:
    """A new Ed25519 signer key named `name` (a note key name: no spaces, no '+')."""
    private = Ed25519PrivateKey.generate()
    seed = private.private_bytes_raw()
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return SignerKey.from_seed(name, seed, public)


def write_key_file(path: Path, key: SignerKey) -> None:
    """Write the signer key to a new file readable by its owner only, never overwriting a key
    that may have signed checkpoints."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise LedgerError("KEY_FILE_EXISTS", f"{path} exists; a key is never overwritten") from None
    except OSError as failed:
        raise LedgerError("KEY_FILE_UNREADABLE", f"{path}: {failed.strerror}") from None
    with os.fdopen(descriptor, "w") as handle:
        handle.write(key.text() + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_key_file(path: Path) -> Signer:
    """The signer key in `path` (KEY_FILE_UNREADABLE, NOTE_KEY_INVALID)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as failed:
        raise LedgerError("KEY_FILE_UNREADABLE", f"{path}: {failed.strerror}") from None
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise LedgerError("NOTE_KEY_INVALID", f"{path} is too large to be a signer key")
    try:
        text = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise LedgerError("NOTE_KEY_INVALID", f"{path} is not a signer key") from None
    return parse_signer(text)


def credential_path(name: str) -> Path | None:
    """The file systemd's `LoadCredential=NAME:...` provides, or None outside such a unit."""
    directory = os.environ.get(CREDENTIALS_DIRECTORY, "")
    if not directory or "/" in name or name in {"", ".", ".."}:
        return None
    return Path(directory) / name


def load_signer(key_file: str | Path | None, credential: str) -> Signer:
    """The signer a command uses: the key file it was given, else the systemd credential."""
    if key_file is not None and str(key_file) != "":
        return read_key_file(Path(key_file))
    path = credential_path(credential)
    if path is not None and path.is_file():
        return read_key_file(path)
    raise LedgerError(
        "CHECKPOINT_KEY_MISSING",
        f"no signing key: give --key FILE, [checkpoint] key, or the systemd credential "
        f"{credential!r} ($CREDENTIALS_DIRECTORY/{credential})",
    )


def checkpoint_verifier_keys(
    settings: CheckpointSettings, given: Sequence[str] | None
) -> tuple[VerifierKey, ...]:
    """The verifier keys `verify` holds stored checkpoints to: those given, else the configured
    ones and the configured signing key's; none leaves their signatures unchecked."""
    if given:
        return tuple(VerifierKey.parse(text) for text in given)
    keys = [VerifierKey.parse(text) for text in settings.log_keys]
    if settings.key:
        verifier = read_key_file(Path(settings.key)).verifier
        if verifier not in keys:
            keys.append(verifier)
    return tuple(keys)
