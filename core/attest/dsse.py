"""DSSE v1 envelopes signed and opened with Ed25519; the shell hands in `sign` and a
`SignatureCheck`, so the core holds no key."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

from aios_ledger.core.digests import canonical_json
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, loads_object
from aios_ledger.core.proofs.notes import ED25519, SignatureCheck, key_id

DSSE_PREFIX = b"DSSEv1"
IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
Sign = Callable[[bytes], bytes]
"""The signer key's Ed25519 signature of a message (the shell's `Signer.sign`)."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's Pre-Authentication Encoding of `payload` under `payload_type`."""
    kind = payload_type.encode("utf-8")
    return b" ".join(
        (DSSE_PREFIX, str(len(kind)).encode(), kind, str(len(payload)).encode(), payload)
    )


def note_key_id(name: str, public_key: bytes) -> str:
    """The C2SP key id of `public_key`, the same in checkpoints and attestations."""
    return key_id(name, ED25519, public_key).hex()


def statement_bytes(statement: JsonObject) -> bytes:
    """A Statement's canonical JSON, so that one Statement is always signed as the same bytes."""
    return canonical_json(statement).encode("ascii")


def sign_envelope(statement: JsonObject, sign: Sign, keyid: str) -> JsonObject:
    """A DSSE envelope of `statement` (an in-toto Statement), signed by `sign` under `keyid`."""
    payload = statement_bytes(statement)
    signature = sign(pae(IN_TOTO_PAYLOAD_TYPE, payload))
    return {
        "payload": base64.b64encode(payload).decode("ascii"),
        "payloadType": IN_TOTO_PAYLOAD_TYPE,
        "signatures": [{"keyid": keyid, "sig": base64.b64encode(signature).decode("ascii")}],
    }


def _refused(detail: str) -> LedgerError:
    return LedgerError("ATTESTATION_INVALID", detail)


def _decode_base64(text: JsonValue, what: str) -> bytes:
    if not isinstance(text, str):
        raise _refused(f"{what} is not base64 text")
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        try:
            return base64.urlsafe_b64decode(text.encode("ascii"))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise _refused(f"{what} is not base64") from None


def open_envelope(
    envelope: JsonValue, public_key: bytes, check: SignatureCheck, keyid: str | None = None
) -> JsonObject:
    """The Statement of a DSSE envelope signed by `public_key`, else `ATTESTATION_INVALID`."""
    if not isinstance(envelope, dict):
        raise _refused("the envelope is not a JSON object")
    payload_type = envelope.get("payloadType")
    if payload_type != IN_TOTO_PAYLOAD_TYPE:
        raise _refused(f"payloadType {payload_type!r} is not {IN_TOTO_PAYLOAD_TYPE}")
    payload = _decode_base64(envelope.get("payload"), "payload")
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise _refused("the envelope holds no signature")
    message = pae(IN_TOTO_PAYLOAD_TYPE, payload)
    for signature in signatures:
        if not isinstance(signature, dict):
            raise _refused("a signature is not a JSON object")
        named = signature.get("keyid")
        if keyid is not None and named not in (None, "", keyid):
            continue
        if check(public_key, message, _decode_base64(signature.get("sig"), "sig")):
            break
    else:
        raise _refused("no signature of the envelope verifies with the key")
    try:
        statement = loads_object(payload, what="payload")
    except LedgerError as refused:
        raise _refused(f"the payload is not a JSON object ({refused.detail})") from None
    return statement
