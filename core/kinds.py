"""The kinds of field every domain's records share, and the per-field constraints.

A kind is a `typing.NewType` whose structure hook carries its whole check (`register_kind`): an
`Identifier` is 1-200 characters of `[A-Za-z0-9._:/@+=-]` starting with a letter or digit, a
`TimestampText` is RFC 3339 text normalised to the ledger's one form (`Timestamp.text`), a
`JsonObjectValue` is a bounded, checked JSON object. A constraint is `Annotated` metadata for
what differs per field: `Annotated[str, Text(max_length=1000)]`, `Annotated[int, Between(1,
3600)]`, `Annotated[str, OneOf(("QUEUED", ...))]`.
"""

from __future__ import annotations

import re
from typing import Any, NewType

import attrs
from aios_ledger.core.digests import PREFIXED_DIGEST, SHA256_HEX, is_digest
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonValue, check_json
from aios_ledger.core.structuring import Constraint, FieldRefused, register_kind
from aios_ledger.core.timestamps import Timestamp

IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+=-]{0,199}$")
MAX_TEXT = 4096
MAX_IDENTIFIER = 200


@attrs.frozen
class Text(Constraint):
    """Text that is not blank, at most `max_length` characters (None: no bound), valid UTF-8
    (no lone surrogate), without NUL unless `nul` allows it, of the form `pattern` if given."""

    max_length: int | None = MAX_TEXT
    pattern: re.Pattern[str] | None = None
    nul: bool = False

    def __call__(self, value: Any) -> str:
        if not isinstance(value, str):
            raise FieldRefused(f"must be a string, got {type(value).__name__}")
        if not value or value.isspace():
            raise FieldRefused("must not be empty")
        if self.max_length is not None and len(value) > self.max_length:
            raise FieldRefused(f"is longer than {self.max_length} characters")
        if not value.isascii():  # ASCII is UTF-8; only other text can hold a lone surrogate
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise FieldRefused("is not valid UTF-8 text") from None
        if not self.nul and "\0" in value:
            raise FieldRefused("holds a NUL character")
        if self.pattern is not None and not self.pattern.fullmatch(value):
            raise FieldRefused(f"{value[:80]!r} is not of the form {self.pattern.pattern}")
        return value


@attrs.frozen
class Between(Constraint):
    """An integer (never a bool or a float) from `minimum` to `maximum`, both included."""

    minimum: int
    maximum: int

    def __call__(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise FieldRefused(f"must be an integer, got {type(value).__name__}")
        if not self.minimum <= value <= self.maximum:
            raise FieldRefused(f"must be between {self.minimum} and {self.maximum}")
        return value


@attrs.frozen
class OneOf(Constraint):
    """One of a few texts, exactly."""

    values: tuple[str, ...]

    def __call__(self, value: Any) -> str:
        if not isinstance(value, str) or value not in self.values:
            raise FieldRefused(f"must be one of {list(self.values)}")
        return value


Identifier = NewType("Identifier", str)
Sha256Hex = NewType("Sha256Hex", str)
LedgerDigest = NewType("LedgerDigest", str)
PrefixedDigest = NewType("PrefixedDigest", str)
TimestampText = NewType("TimestampText", str)
JsonObjectValue = NewType("JsonObjectValue", dict[str, JsonValue])
JsonArrayValue = NewType("JsonArrayValue", list[JsonValue])

_IDENTIFIER_TEXT = Text(max_length=MAX_IDENTIFIER, pattern=IDENTIFIER)


def _identifier(value: Any) -> Identifier:
    if isinstance(value, str) and IDENTIFIER.fullmatch(value):  # the pattern implies the rest
        return Identifier(value)
    return Identifier(_IDENTIFIER_TEXT(value))


def _sha256_hex(value: Any) -> Sha256Hex:
    if not isinstance(value, str) or not SHA256_HEX.fullmatch(value):
        raise FieldRefused("must be 64 lowercase hex characters")
    return Sha256Hex(value)


def _ledger_digest(value: Any) -> LedgerDigest:
    if not isinstance(value, str) or not is_digest(value):
        raise FieldRefused("must be 'sha256:' followed by 64 hex, or 64 hex")
    return LedgerDigest(value)


def _prefixed_digest(value: Any) -> PrefixedDigest:
    if not isinstance(value, str) or not PREFIXED_DIGEST.fullmatch(value):
        raise FieldRefused("must be 'sha256:' followed by 64 hex")
    return PrefixedDigest(value)


def _timestamp_text(value: Any) -> TimestampText:
    if not isinstance(value, str):
        raise FieldRefused(f"must be an RFC 3339 string, got {type(value).__name__}")
    try:
        return TimestampText(Timestamp.parse(value).text)
    except LedgerError as refused:
        raise FieldRefused(refused.detail) from None


def json_value_check(kind: type, name: str) -> Any:
    """A JSON `name` (object or array) that `check_json` accepts: bounded depth and numbers,
    valid text, nothing that is not JSON."""

    def check(value: Any) -> Any:
        if not isinstance(value, kind):
            raise FieldRefused(f"must be a JSON {name}, got {type(value).__name__}")
        try:
            return check_json(value, what=name)
        except LedgerError as refused:
            raise FieldRefused(str(refused)) from None

    return check


register_kind(Identifier, _identifier)
register_kind(Sha256Hex, _sha256_hex)
register_kind(LedgerDigest, _ledger_digest)
register_kind(PrefixedDigest, _prefixed_digest)
register_kind(TimestampText, _timestamp_text)
register_kind(JsonObjectValue, json_value_check(dict, "object"))
register_kind(JsonArrayValue, json_value_check(list, "array"))
