"""The kinds of field every domain's records share (`typing.NewType`s whose structure hook carries
their whole check), and the `Annotated` constraints for what differs per field."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NewType

import attrs
from aios_ledger.core.digests import PREFIXED_DIGEST, SHA256_HEX, is_digest
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonValue, check_json
from aios_ledger.core.structuring import Constraint, FieldRefused, register_kind
from aios_ledger.core.timestamps import Timestamp

IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+=-]{0,199}$")
# The ids a route addresses as one path segment: an Identifier without `/`, which no segment holds.
ROUTE_IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,199}$")
MAX_TEXT = 4096
MAX_IDENTIFIER = 200
# Schema patterns (ECMA-262 and Python alike): some visible character, and no NUL unless allowed.
NOT_BLANK = r"\S"
NOT_BLANK_WITHOUT_NUL = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"
# The timestamps a schema documents: RFC 3339 date-times with an offset.
RFC3339 = (
    r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)


@attrs.frozen
class Text(Constraint):
    """Non-blank valid UTF-8 up to `max_length`, NUL only if `nul`, matching `pattern`."""

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

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string", "minLength": 1}
        if self.max_length is not None:
            schema["maxLength"] = self.max_length
        if self.pattern is not None:  # every form given here starts with a visible character
            schema["pattern"] = self.pattern.pattern
        else:
            schema["pattern"] = NOT_BLANK if self.nul else NOT_BLANK_WITHOUT_NUL
        return schema


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

    def json_schema(self) -> dict[str, Any]:
        return {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}


@attrs.frozen
class OneOf(Constraint):
    """One of a few texts, exactly."""

    values: tuple[str, ...]

    def __call__(self, value: Any) -> str:
        if not isinstance(value, str) or value not in self.values:
            raise FieldRefused(f"must be one of {', '.join(self.values)}")
        return value

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.values)}


Identifier = NewType("Identifier", str)
RouteIdentifier = NewType("RouteIdentifier", str)
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


_ROUTE_IDENTIFIER_TEXT = Text(max_length=MAX_IDENTIFIER, pattern=ROUTE_IDENTIFIER)


def _route_identifier(value: Any) -> RouteIdentifier:
    if isinstance(value, str) and ROUTE_IDENTIFIER.fullmatch(value):
        return RouteIdentifier(value)
    if isinstance(value, str) and IDENTIFIER.fullmatch(value):  # an Identifier holding `/`
        raise FieldRefused(
            f"{value[:80]!r} holds '/', which no URL path can address: use another character "
            "(e.g. '-' or ':')"
        )
    return RouteIdentifier(_ROUTE_IDENTIFIER_TEXT(value))


def text_check(accepts: Callable[[str], object], refusal: str) -> Callable[[Any], Any]:
    """A kind's structure hook: a string that `accepts` takes, else `refusal`."""

    def check(value: Any) -> Any:
        if not isinstance(value, str) or not accepts(value):
            raise FieldRefused(refusal)
        return value

    return check


_sha256_hex = text_check(SHA256_HEX.fullmatch, "must be 64 lowercase hex characters")
_ledger_digest = text_check(is_digest, "must be 'sha256:' followed by 64 hex, or 64 hex")
_prefixed_digest = text_check(PREFIXED_DIGEST.fullmatch, "must be 'sha256:' followed by 64 hex")


def _timestamp_text(value: Any) -> TimestampText:
    if not isinstance(value, str):
        raise FieldRefused(f"must be an RFC 3339 string, got {type(value).__name__}")
    try:
        return TimestampText(Timestamp.parse(value).text)
    except LedgerError as refused:
        raise FieldRefused(refused.detail) from None


def json_value_check(kind: type, name: str) -> Any:
    """A JSON `name` (object or array) that `check_json` accepts."""

    def check(value: Any) -> Any:
        if not isinstance(value, kind):
            raise FieldRefused(f"must be a JSON {name}, got {type(value).__name__}")
        try:
            return check_json(value, what=name)
        except LedgerError as refused:
            raise FieldRefused(str(refused)) from None

    return check


def _pattern(form: re.Pattern[str]) -> dict[str, Any]:
    return {"type": "string", "pattern": form.pattern}


register_kind(Identifier, _identifier, schema=_IDENTIFIER_TEXT.json_schema())
register_kind(RouteIdentifier, _route_identifier, schema=_ROUTE_IDENTIFIER_TEXT.json_schema())
register_kind(Sha256Hex, _sha256_hex, schema=_pattern(SHA256_HEX))
register_kind(
    LedgerDigest,
    _ledger_digest,
    schema={"type": "string", "anyOf": [_pattern(PREFIXED_DIGEST), _pattern(SHA256_HEX)]},
)
register_kind(PrefixedDigest, _prefixed_digest, schema=_pattern(PREFIXED_DIGEST))
register_kind(
    TimestampText,
    _timestamp_text,
    schema={"type": "string", "format": "date-time", "pattern": RFC3339},
)
register_kind(JsonObjectValue, json_value_check(dict, "object"), schema={"type": "object"})
register_kind(JsonArrayValue, json_value_check(list, "array"), schema={"type": "array"})
