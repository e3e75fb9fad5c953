"""Golden digests of the core's canonical forms."""

from __future__ import annotations

from aios_ledger.core import canonical_json, digest_bytes, sha256_hex
from syrupy.assertion import SnapshotAssertion


def test_digests_are_stable(golden: SnapshotAssertion) -> None:
    value = {"b": [1, 2.5, None, True], "a": "é\u2028", "c": {"z": {}, "y": []}}
    assert canonical_json(value) == (
        '{"a":"\\u00e9\\u2028","b":[1,2.5,null,true],"c":{"y":[],"z":{}}}'
    )
    assert golden == {
        "sha256_hex": sha256_hex(value),
        "evidence": digest_bytes("evidence", b"x"),
        "spec": digest_bytes("spec", b"x"),
    }
