"""The Ed25519 cosignature/v1 message (C2SP `tlog-cosignature`): a signed-note signature of type
0x04 over the timestamp and the checkpoint body."""

from __future__ import annotations

COSIGNATURE_HEADER = "cosignature/v1\n"
TIMESTAMP_SIZE = 8
COSIGNATURE_SIZE = TIMESTAMP_SIZE + 64
# timestamped_signature.timestamp MUST NOT exceed 2^63 - 1.
MAX_TIMESTAMP = (1 << 63) - 1


def cosigned_message(timestamp: int, body: str) -> bytes:
    """What a cosignature/v1 signs: the header, the time line, and the checkpoint body."""
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise ValueError("a cosignature's timestamp is 0 to 2**63 - 1")
    return f"{COSIGNATURE_HEADER}time {timestamp}\n{body}".encode()


def timestamped_signature(timestamp: int, signature: bytes) -> bytes:
    """The signature bytes of a cosignature line (after its key ID): timestamp || signature."""
    if not 0 <= timestamp <= MAX_TIMESTAMP or len(signature) != 64:
        raise ValueError("a timestamp of 0 to 2**63 - 1 and a 64-byte Ed25519 signature")
    return timestamp.to_bytes(TIMESTAMP_SIZE, "big") + signature


def split_cosignature(signature: bytes) -> tuple[int, bytes] | None:
    """(timestamp, signature) of a cosignature line after its key ID, None when malformed."""
    if len(signature) != COSIGNATURE_SIZE:
        return None
    timestamp = int.from_bytes(signature[:TIMESTAMP_SIZE], "big")
    if timestamp > MAX_TIMESTAMP:
        return None
    return timestamp, signature[TIMESTAMP_SIZE:]
