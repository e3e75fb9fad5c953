"""Signed notes (C2SP `signed-note`, as Go's `sumdb/note`): the core builds and parses their bytes;
the shell hands in Ed25519 as a `SignatureCheck`, so decisions stay pure."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Iterable

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.proofs.cosignatures import cosigned_message, split_cosignature

# Signature type bytes (C2SP signed-note, "Signature types").
ED25519 = 0x01
COSIGNATURE_V1 = 0x04
PUBLIC_KEY_SIZE = 32
SEED_SIZE = 32
ED25519_SIGNATURE_SIZE = 64
KEY_ID_SIZE = 4
# Go's note.Open refuses more than 100 signatures; the spec asks verifiers to take at least 16.
MAX_SIGNATURES = 100
# A larger note is refused before it is parsed.
MAX_NOTE_BYTES = 1 << 16
SIGNATURE_PREFIX = "\u2014 "  # em dash, space
SIGNER_KEY_PREFIX = "PRIVATE+KEY+"

SignatureCheck = Callable[[bytes, bytes, bytes], bool]
"""Ed25519 verification, (public key, message, signature) -> whether it verifies."""


def is_key_name(name: object) -> bool:
    """A key name: non-empty, with neither a Unicode space nor `+` (as Go's isValidName)."""
    return (
        isinstance(name, str)
        and name != ""
        and "+" not in name
        and not any(character.isspace() for character in name)
        and all(ord(character) >= 0x20 for character in name)
    )


def _require_key_name(name: str) -> None:
    if not is_key_name(name):
        detail = f"{str(name)[:80]!r} is not a key name (no spaces, no '+')"
        raise LedgerError("NOTE_KEY_INVALID", detail)


def _key_parts(text: str, shape: str) -> tuple[str, str, bytes | None]:
    """The name, hex key ID and decoded key of a key's `name+keyid+base64` text (NOTE_KEY_INVALID,
    saying its `shape`, when it is not three parts or the name is not a key name)."""
    parts = text.split("+", 2)
    if len(parts) != 3:
        raise LedgerError("NOTE_KEY_INVALID", shape)
    _require_key_name(parts[0])
    return parts[0], parts[1], b64decode_canonical(parts[2])


def key_id(name: str, key_type: int, public_key: bytes) -> bytes:
    """SHA-256(name || 0x0A || type || public key)[:4]: the key ID of signed-note."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([key_type]) + public_key).digest()[:4]


def b64decode_canonical(text: str) -> bytes | None:
    """Canonical padded base64 only, so that one signature or key has one text."""
    try:
        decoded = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
    return decoded if base64.b64encode(decoded).decode() == text else None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@attrs.frozen
class VerifierKey:
    """A public key by name: `name+hex(key ID)+base64(type || public key)`."""

    name: str
    key_type: int
    public_key: bytes

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.key_type, self.public_key)

    def text(self) -> str:
        return f"{self.name}+{self.key_id.hex()}+{_b64(bytes([self.key_type]) + self.public_key)}"

    def as_type(self, key_type: int) -> VerifierKey:
        """The same public key under another signature type, as a witness's key for cosignatures."""
        return attrs.evolve(self, key_type=key_type)

    @classmethod
    def parse(cls, text: object) -> VerifierKey:
        """A verifier key from its text, else NOTE_KEY_INVALID."""
        if not isinstance(text, str):
            raise LedgerError("NOTE_KEY_INVALID", "a verifier key is text")
        name, hex_id, material = _key_parts(text.strip(), "a verifier key is name+keyid+key")
        if material is None or len(material) != 1 + PUBLIC_KEY_SIZE:
            raise LedgerError("NOTE_KEY_INVALID", "the key is not base64 of a type and 32 bytes")
        if material[0] not in (ED25519, COSIGNATURE_V1):
            raise LedgerError("NOTE_KEY_INVALID", f"unknown signature type {material[0]:#04x}")
        key = cls(name, material[0], material[1:])
        if hex_id != key.key_id.hex():
            raise LedgerError("NOTE_KEY_INVALID", f"key ID {hex_id[:16]!r} is not this key's")
        return key


@attrs.frozen(repr=False)
class SignerKey:
    """A private Ed25519 key by name; the shell derives its public key for `verifier`."""

    name: str
    stated_key_id: bytes
    seed: bytes

    def __repr__(self) -> str:  # never print a seed
        return f"SignerKey({self.name!r}, {self.stated_key_id.hex()})"

    def verifier(self, public_key: bytes) -> VerifierKey:
        """The verifier key of `public_key`, if the written key ID is its."""
        key = VerifierKey(self.name, ED25519, public_key)
        if key.key_id != self.stated_key_id:
            raise LedgerError("NOTE_KEY_INVALID", "the signer key's ID is not its public key's")
        return key

    def text(self) -> str:
        material = _b64(bytes([ED25519]) + self.seed)
        return f"{SIGNER_KEY_PREFIX}{self.name}+{self.stated_key_id.hex()}+{material}"

    @classmethod
    def from_seed(cls, name: str, seed: bytes, public_key: bytes) -> SignerKey:
        _require_key_name(name)
        if len(seed) != SEED_SIZE or len(public_key) != PUBLIC_KEY_SIZE:
            raise LedgerError("NOTE_KEY_INVALID", "an Ed25519 seed and public key are 32 bytes")
        return cls(name, key_id(name, ED25519, public_key), seed)

    @classmethod
    def parse(cls, text: object) -> SignerKey:
        if not isinstance(text, str) or not text.startswith(SIGNER_KEY_PREFIX):
            raise LedgerError("NOTE_KEY_INVALID", "a signer key starts with PRIVATE+KEY+")
        name, hex_id, material = _key_parts(
            text.strip()[len(SIGNER_KEY_PREFIX) :], "a signer key is PRIVATE+KEY+name+keyid+key"
        )
        if (
            len(hex_id) != 2 * KEY_ID_SIZE
            or any(digit not in "0123456789abcdef" for digit in hex_id)
            or material is None
            or len(material) != 1 + SEED_SIZE
            or material[0] != ED25519
        ):
            raise LedgerError("NOTE_KEY_INVALID", "not an Ed25519 signer key")
        return cls(name, bytes.fromhex(hex_id), material[1:])


@attrs.frozen
class NoteSignature:
    """One signature line: the key's name and ID, and the signature bytes after the ID."""

    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> str:
        return f"{SIGNATURE_PREFIX}{self.name} {_b64(self.key_id + self.signature)}\n"

    def by(self, key: VerifierKey) -> bool:
        return self.name == key.name and self.key_id == key.key_id


@attrs.frozen
class SignedNote:
    """A note's text (ending in a newline) and its signatures, in order."""

    text: str
    signatures: tuple[NoteSignature, ...]

    def encode(self) -> str:
        return self.text + "\n" + "".join(signature.line() for signature in self.signatures)

    def with_signature(self, signature: NoteSignature) -> SignedNote:
        """The note with `signature` last, replacing the same key's, as Go does."""
        kept = tuple(
            held
            for held in self.signatures
            if (held.name, held.key_id) != (signature.name, signature.key_id)
        )
        return attrs.evolve(self, signatures=(*kept, signature))


def _check_text_characters(message: str) -> None:
    for character in message:
        if ord(character) < 0x20 and character != "\n":
            raise LedgerError("NOTE_INVALID", "a note holds no control character but newline")
        if 0xD800 <= ord(character) <= 0xDFFF:
            raise LedgerError("NOTE_INVALID", "a note is valid UTF-8")


def note_text(text: str) -> str:
    """`text` as a note's text, else NOTE_INVALID."""
    if not isinstance(text, str) or not text.endswith("\n"):
        raise LedgerError("NOTE_INVALID", "a note's text ends in a newline")
    _check_text_characters(text)
    return text


def parse_note(message: str | bytes) -> SignedNote:
    """A signed note, its signatures unchecked; NOTE_INVALID unless well-formed."""
    if isinstance(message, bytes):
        if len(message) > MAX_NOTE_BYTES:
            raise LedgerError("NOTE_INVALID", f"a note is at most {MAX_NOTE_BYTES} bytes")
        try:
            message = message.decode("utf-8")
        except UnicodeDecodeError:
            raise LedgerError("NOTE_INVALID", "a note is valid UTF-8") from None
    if not isinstance(message, str):
        raise LedgerError("NOTE_INVALID", "a note is text")
    if len(message.encode("utf-8", "surrogatepass")) > MAX_NOTE_BYTES:
        raise LedgerError("NOTE_INVALID", f"a note is at most {MAX_NOTE_BYTES} bytes")
    _check_text_characters(message)
    split = message.rfind("\n\n")
    if split < 0:
        raise LedgerError("NOTE_INVALID", "a note has a blank line before its signatures")
    text, block = message[: split + 1], message[split + 2 :]
    if not block or not block.endswith("\n"):
        raise LedgerError("NOTE_INVALID", "a note ends with signature lines, each with newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise LedgerError("NOTE_INVALID", f"a note has at most {MAX_SIGNATURES} signatures")
    return SignedNote(text, tuple(_parse_signature_line(line) for line in lines))


def _parse_signature_line(line: str) -> NoteSignature:
    if not line.startswith(SIGNATURE_PREFIX):
        raise LedgerError("NOTE_INVALID", "a signature line starts with an em dash and a space")
    name, space, encoded = line[len(SIGNATURE_PREFIX) :].partition(" ")
    raw = b64decode_canonical(encoded) if space else None
    if not is_key_name(name) or raw is None or len(raw) < KEY_ID_SIZE + 1:
        raise LedgerError("NOTE_INVALID", f"malformed signature line {line[:80]!r}")
    return NoteSignature(name, raw[:KEY_ID_SIZE], raw[KEY_ID_SIZE:])


def ed25519_signature(key: VerifierKey, signature: bytes) -> NoteSignature:
    """The signature line of an Ed25519 `signature` (64 bytes) over a note's text."""
    if key.key_type != ED25519 or len(signature) != ED25519_SIGNATURE_SIZE:
        raise LedgerError("NOTE_SIGNATURE_INVALID", "an Ed25519 note signature is 64 bytes")
    return NoteSignature(key.name, key.key_id, signature)


@attrs.frozen
class OpenedNote:
    """A note whose signatures were checked, and those of unknown keys."""

    note: SignedNote
    verified: tuple[NoteSignature, ...]
    unverified: tuple[NoteSignature, ...]

    @property
    def text(self) -> str:
        return self.note.text


def signed_message(key: VerifierKey, text: str, signature: bytes) -> tuple[bytes, bytes] | None:
    """What a signature of `key`'s type signs, and the signature; None when malformed."""
    if key.key_type == ED25519:
        if len(signature) != ED25519_SIGNATURE_SIZE:
            return None
        return text.encode(), signature
    if key.key_type == COSIGNATURE_V1:
        split = split_cosignature(signature)
        if split is None:
            return None
        timestamp, inner = split
        return cosigned_message(timestamp, text), inner
    return None


def open_note(
    message: str | bytes | SignedNote, known: Iterable[VerifierKey], check: SignatureCheck
) -> OpenedNote:
    """Check a note's signatures against `known`, as Go's note.Open does."""
    note = message if isinstance(message, SignedNote) else parse_note(message)
    by_id: dict[tuple[str, bytes], VerifierKey] = {}
    for known_key in known:
        named = (known_key.name, known_key.key_id)
        if named in by_id and by_id[named] != known_key:
            raise LedgerError(
                "NOTE_KEY_INVALID", f"two keys are named {known_key.name}+{known_key.key_id.hex()}"
            )
        by_id[named] = known_key
    verified: list[NoteSignature] = []
    unverified: list[NoteSignature] = []
    for signature in note.signatures:
        key = by_id.get((signature.name, signature.key_id))
        if key is None:
            if signature not in unverified:
                unverified.append(signature)
            continue
        if any(held.by(key) for held in verified):
            continue  # a key's repeated signature: the first one counted
        signed = signed_message(key, note.text, signature.signature)
        if signed is None or not check(key.public_key, *signed):
            raise LedgerError(
                "NOTE_SIGNATURE_INVALID",
                f"the signature of {key.name}+{key.key_id.hex()} does not verify",
            )
        verified.append(signature)
    if not verified:
        raise LedgerError("NOTE_UNVERIFIED", "no signature of a known key is on the note")
    return OpenedNote(note, tuple(verified), tuple(unverified))
