"""The ledger's Ed25519 signing key, outside the database, in the C2SP signed-note formats:

- signer key: `PRIVATE+KEY+<name>+<hexkeyid>+<base64(0x01 || 32-byte seed)>`;
- verifier key (what a reader is given): `<name>+<hexkeyid>+<base64(0x01 || 32-byte public key)>`,

where the key id is the first 4 bytes of SHA-256(name || "\\n" || 0x01 || public key). The signer
key is read from a file: `--attest-key PATH`, `[attest] key = PATH`, `$AIOS_LEDGER_ATTEST_KEY`,
or a systemd credential named `attest-key` under `$CREDENTIALS_DIRECTORY`. The same file format
as the checkpoints' key (`aios-ledger key generate`), so one key can sign both.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.attest import note_key_id
from aios_ledger.core.attest.dsse import ED25519_NOTE_ALGORITHM, public_key_bytes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

KEY_ENV = "AIOS_LEDGER_ATTEST_KEY"
CREDENTIAL_NAME = "attest-key"
SIGNER_PREFIX = "PRIVATE+KEY+"


@attrs.frozen
class SigningKey:
    name: str
    key: Ed25519PrivateKey

    @property
    def keyid(self) -> str:
        return note_key_id(self.name, self.key.public_key())

    def signer_text(self) -> str:
        seed = self.key.private_bytes_raw()
        encoded = base64.b64encode(ED25519_NOTE_ALGORITHM + seed).decode("ascii")
        return f"{SIGNER_PREFIX}{self.name}+{self.keyid}+{encoded}"

    def verifier_text(self) -> str:
        public = public_key_bytes(self.key.public_key())
        encoded = base64.b64encode(ED25519_NOTE_ALGORITHM + public).decode("ascii")
        return f"{self.name}+{self.keyid}+{encoded}"


@attrs.frozen
class VerifierKey:
    name: str
    keyid: str
    key: Ed25519PublicKey


def _bad(detail: str) -> LedgerError:
    return LedgerError("ATTEST_KEY_INVALID", detail)


def _key_bytes(encoded: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise _bad(f"the {what} key is not base64") from None
    if len(raw) != 33 or raw[:1] != ED25519_NOTE_ALGORITHM:
        raise _bad(f"the {what} key is not an Ed25519 note key (0x01 and 32 bytes)")
    return raw[1:]


def _valid_name(name: str) -> bool:
    return bool(name) and all(c.isprintable() and c not in " +" for c in name)


def parse_signer(text: str) -> SigningKey:
    text = text.strip()
    if not text.startswith(SIGNER_PREFIX):
        raise _bad("a signer key starts with PRIVATE+KEY+")
    parts = text[len(SIGNER_PREFIX) :].split("+", 2)
    if len(parts) != 3 or not _valid_name(parts[0]):
        raise _bad("a signer key is PRIVATE+KEY+NAME+KEYID+KEY")
    name, keyid, encoded = parts
    signing = SigningKey(name, Ed25519PrivateKey.from_private_bytes(_key_bytes(encoded, "signer")))
    if signing.keyid != keyid.lower():
        raise _bad(f"the signer key's id {keyid} is not its key's ({signing.keyid})")
    return signing


def parse_verifier(text: str) -> VerifierKey:
    parts = text.strip().split("+", 2)
    if len(parts) != 3 or not _valid_name(parts[0]):
        raise _bad("a verifier key is NAME+KEYID+KEY")
    name, keyid, encoded = parts
    key = Ed25519PublicKey.from_public_bytes(_key_bytes(encoded, "verifier"))
    if note_key_id(name, key) != keyid.lower():
        raise _bad(f"the verifier key's id {keyid} is not its key's ({note_key_id(name, key)})")
    return VerifierKey(name, keyid.lower(), key)


def generate_key(name: str) -> SigningKey:
    if not _valid_name(name):
        raise _bad(f"a key name has no space or '+': {name!r}")
    return SigningKey(name, Ed25519PrivateKey.generate())


def read_verifier(text_or_path: str) -> VerifierKey:
    """A verifier key given as its text, or as a file holding it."""
    candidate = Path(text_or_path)
    if "+" not in text_or_path or candidate.is_file():
        try:
            return parse_verifier(candidate.read_text(encoding="utf-8"))
        except OSError as failed:
            raise _bad(f"cannot read the verifier key {text_or_path}: {failed.strerror}") from None
    return parse_verifier(text_or_path)


def load_signer(path: str | os.PathLike[str]) -> SigningKey:
    try:
        return parse_signer(Path(path).read_text(encoding="utf-8"))
    except OSError as failed:
        raise _bad(f"cannot read the attestation key {path}: {failed.strerror}") from None
    except UnicodeDecodeError:
        raise _bad(f"the attestation key {path} is not text") from None


def configured_key_path(option: str | os.PathLike[str] | None) -> str | None:
    """Where the signing key is: the option (`--attest-key`, `[attest] key`), else the
    environment, else a systemd credential; None when none is configured."""
    if option:
        return os.fspath(option)
    if os.environ.get(KEY_ENV):
        return os.environ[KEY_ENV]
    credentials = os.environ.get("CREDENTIALS_DIRECTORY")
    if credentials and (Path(credentials) / CREDENTIAL_NAME).is_file():
        return str(Path(credentials) / CREDENTIAL_NAME)
    return None
