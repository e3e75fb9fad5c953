"""Strict structuring of untrusted mappings into records, driven by tables of field checks.

A record declares `{field: check}`; `structure` refuses a value that is not a mapping, has an
unknown or a missing field, or has a field its check refuses. No coercion ever happens (the
integer 7 is not the string "7", `True` is not the integer 1).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from aios_ledger.core.digests import SHA256_HEX, is_digest
from aios_ledger.core.errors import LedgerError

Check = Callable[[object], Any]

IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+=-]{0,199}$")
MAX_TEXT = 4096


class FieldRefused(Exception):
    """Raised by a check; `structure` turns it into the caller's `LedgerError` class."""


def structure(
    raw: object,
    checks: Mapping[str, Check],
    *,
    what: str,
    error: type[LedgerError] = LedgerError,
    code: str = "FIELDS_INVALID",
    optional: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise error(code, f"{what} must be a JSON object, got {type(raw).__name__}")
    present = 0
    for name in checks:
        if name in raw:
            present += 1
        elif name not in optional:
            _refuse_field_names(raw, checks, what, error, code, optional)
    if present != len(raw):
        _refuse_field_names(raw, checks, what, error, code, optional)
    values: dict[str, Any] = {}
    for name, check in checks.items():
        if name not in raw:
            values[name] = None
            continue
        try:
            values[name] = check(raw[name])
        except FieldRefused as refused:
            raise error(code, f"{what}.{name}: {refused}") from None
    return values


def _refuse_field_names(
    raw: Mapping[Any, object],
    checks: Mapping[str, Check],
    what: str,
    error: type[LedgerError],
    code: str,
    optional: frozenset[str],
) -> NoReturn:
    """Every unknown and every missing field at once (the caller found at least one)."""
    keys = set(raw)
    unknown = sorted(str(key) for key in keys - set(checks))
    missing = sorted(set(checks) - keys - optional)
    parts = []
    if unknown:
        parts.append(f"unknown {unknown}")
    if missing:
        parts.append(f"missing {missing}")
    raise error(code, f"{what}: " + ", ".join(parts))


def text(*, max_length: int = MAX_TEXT, pattern: re.Pattern[str] | None = None) -> Check:
    def check(value: object) -> str:
        if not isinstance(value, str):
            raise FieldRefused(f"must be a string, got {type(value).__name__}")
        if not value or value.isspace():
            raise FieldRefused("must not be empty")
        if len(value) > max_length:
            raise FieldRefused(f"is longer than {max_length} characters")
        if not value.isascii():  # ASCII is UTF-8; only other text can hold a lone surrogate
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise FieldRefused("is not valid UTF-8 text") from None
        if "\0" in value:
            raise FieldRefused("holds a NUL character")
        if pattern is not None and not pattern.fullmatch(value):
            raise FieldRefused(f"{value[:80]!r} is not of the form {pattern.pattern}")
        return value

    return check


def identifier() -> Check:
    return text(max_length=200, pattern=IDENTIFIER)


def integer(*, minimum: int, maximum: int) -> Check:
    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise FieldRefused(f"must be an integer, got {type(value).__name__}")
        if not minimum <= value <= maximum:
            raise FieldRefused(f"must be between {minimum} and {maximum}")
        return value

    return check


def one_of(*allowed: str) -> Check:
    def check(value: object) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise FieldRefused(f"must be one of {list(allowed)}")
        return value

    return check


def sha256_field() -> Check:
    def check(value: object) -> str:
        if not isinstance(value, str) or not SHA256_HEX.fullmatch(value):
            raise FieldRefused("must be 64 lowercase hex characters")
        return value

    return check


def digest_field() -> Check:
    def check(value: object) -> str:
        if not isinstance(value, str) or not is_digest(value):
            raise FieldRefused("must be 'sha256:' followed by 64 hex, or 64 hex")
        return value

    return check


def nullable(inner: Check) -> Check:
    def check(value: object) -> Any:
        return None if value is None else inner(value)

    return check
