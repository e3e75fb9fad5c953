"""Golden digests of the core's canonical forms."""

from __future__ import annotations

import json

import pytest
from aios_ledger.core import LedgerError, canonical_json, digest_bytes, sha256_hex
from aios_ledger.core.jsonvalue import JsonValue, _python_encoder, encode_checked
from hypothesis import given
from hypothesis import strategies as st
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


# Any JSON the ledger accepts: text of every code point but lone surrogates, finite floats.
_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_CHECKED_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**29), max_value=10**29)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)


@given(_CHECKED_JSON)
def test_the_reused_encoder_writes_what_json_dumps_writes(value: JsonValue) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    assert encode_checked(value) == expected
    assert canonical_json(value) == expected
    assert "".join(_python_encoder()(value, 0)) == expected


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        (float("nan"), "Out of range float"),
        ({"a": float("inf")}, "Out of range float"),
        ([b"bytes"], "bytes is not JSON"),
        ({1: "x", "a": "y"}, "not supported between"),
    ],
)
def test_what_the_encoder_still_refuses_is_json_invalid(value: object, detail: str) -> None:
    with pytest.raises(LedgerError) as refused:
        encode_checked(value)  # type: ignore[arg-type]
    assert refused.value.code == "JSON_INVALID"
    assert detail in refused.value.detail
