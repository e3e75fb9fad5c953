"""Canonical JSON and the digests built on it; `digest_bytes` is domain-separated and prefixed, so
that a digest of one kind can never pass for another."""

from __future__ import annotations

import hashlib
import re

from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonValue, dumps_canonical

SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
PREFIXED_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def canonical_json(value: object) -> str:
    """Sorted keys, no whitespace, ASCII-escaped; NaN and Infinity are refused."""
    return dumps_canonical(value)


def sha256_hex(value: object) -> str:
    return sha256_of_canonical(canonical_json(value))


def sha256_of_canonical(text: str) -> str:
    """`sha256_hex` of a value whose canonical JSON text is already at hand."""
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def digest_bytes(domain: str, data: bytes) -> str:
    if not domain or "\0" in domain:
        raise LedgerError("DIGEST_DOMAIN_INVALID", f"domain {domain!r} is empty or holds NUL")
    hasher = hashlib.sha256(domain.encode("utf-8"))
    hasher.update(b"\0")
    hasher.update(data)
    return "sha256:" + hasher.hexdigest()


def digest_json(domain: str, value: JsonValue) -> str:
    return digest_bytes(domain, canonical_json(value).encode("ascii"))


def is_digest(text: str) -> bool:
    """A ledger digest (`sha256:` + 64 hex) or a bare 64-hex sha256."""
    return bool(PREFIXED_DIGEST.fullmatch(text) or SHA256_HEX.fullmatch(text))
