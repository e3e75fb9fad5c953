"""Untrusted JSON at the edge: parse, bound and serialise, so that deep nesting, huge numbers, lone
surrogates or NaN become a `LedgerError` with a stable code, never a `RecursionError`."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import TypeAlias, cast

from aios_ledger.core.errors import LedgerError

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
JsonObject: TypeAlias = dict[str, JsonValue]

MAX_DEPTH = 64
MAX_INT_DIGITS = 30
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
_INT_LIMIT = 10**MAX_INT_DIGITS


# Where a value sits, for error messages: `what`, or (parent, `[index]` / `.key` / ` key`).
_Path: TypeAlias = "str | tuple[_Path, int | str]"


def check_json(value: object, *, what: str = "value", max_depth: int = MAX_DEPTH) -> JsonValue:
    """Refuse anything that is not plain, bounded JSON; fast for values certainly valid."""
    stack: list[tuple[object, int, _Path]] = [(value, 0, what)]
    pop = stack.pop
    push = stack.append
    while stack:
        item, depth, path = pop()
        if depth > max_depth:
            raise LedgerError(
                "JSON_TOO_DEEP", f"{_render(path)} nests deeper than {max_depth} levels"
            )
        child_depth = depth + 1
        shallow = child_depth <= max_depth
        if isinstance(item, dict):  # the common case, first (no other JSON type is a dict)
            for key, child in item.items():
                if type(key) is not str or not key.isascii():
                    _check_key(key, path)
                if shallow and _plainly_valid(child):
                    continue
                push((child, child_depth, (path, "." + key)))
            continue
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, int):
            if abs(item) >= _INT_LIMIT:
                raise LedgerError(
                    "JSON_NUMBER_TOO_LARGE", f"{_render(path)} has more than 30 digits"
                )
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise LedgerError("JSON_INVALID", f"{_render(path)} is NaN or infinite")
            continue
        if isinstance(item, str):
            _check_text(item, path)
            continue
        if isinstance(item, list):
            for index, child in enumerate(item):
                if shallow and _plainly_valid(child):
                    continue
                push((child, child_depth, (path, index)))
            continue
        raise LedgerError("JSON_INVALID", f"{_render(path)} is a {type(item).__name__}, not JSON")
    return value  # type: ignore[return-value]


def _check_key(key: object, path: _Path) -> None:
    """A member name that is not plain ASCII text: refused unless it is valid UTF-8 text."""
    if not isinstance(key, str):
        raise LedgerError("JSON_INVALID", f"{_render(path)} has a non-string key {key!r}")
    _check_text(key, (path, " key"))


def _plainly_valid(value: object) -> bool:
    kind = type(value)
    if kind is str:
        return cast(str, value).isascii()
    if value is None or kind is bool:
        return True
    return kind is int and -_INT_LIMIT < cast(int, value) < _INT_LIMIT


def _render(path: _Path) -> str:
    """`what`, then `[index]` for list items, `.key` for members, ` key` for a dict's key."""
    parts: list[str] = []
    while isinstance(path, tuple):
        path, step = path
        parts.append(f"[{step}]" if isinstance(step, int) else step)
    parts.append(path)
    return "".join(reversed(parts))


def _check_text(text: str, path: _Path) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LedgerError("JSON_INVALID", f"{_render(path)} is not valid UTF-8 text") from exc


def dumps_canonical(value: object) -> str:
    return encode_checked(check_json(value))


def encode_checked(value: JsonValue) -> str:
    """Canonical JSON text of a value already checked (else `JSON_INVALID`)."""
    try:
        return "".join(_ENCODE(value, 0))
    except (TypeError, ValueError, RecursionError) as exc:
        raise LedgerError("JSON_INVALID", f"cannot serialise: {exc}") from exc


def _not_json(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON")


def _python_encoder() -> Callable[[object, int], list[str] | tuple[str, ...]]:
    encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)

    def encode(value: object, _level: int) -> list[str]:
        return [encoder.encode(value)]

    return encode


def _canonical_encoder() -> Callable[[object, int], list[str] | tuple[str, ...]]:
    """The C encoder with canonical settings, made once, as `json.dumps` builds one per call."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _python_encoder()
    try:
        encode: Callable[[object, int], list[str] | tuple[str, ...]] = make(
            None, _not_json, encode_basestring_ascii, None, ":", ",", True, False, False
        )
    except TypeError:  # another interpreter version's signature
        return _python_encoder()
    return encode


_ENCODE = _canonical_encoder()


def loads_document(text: str | bytes, *, what: str = "document") -> JsonValue:
    """Parse JSON text (or UTF-8 bytes) into a checked value."""
    if isinstance(text, bytes):
        if len(text) > MAX_DOCUMENT_BYTES:
            raise LedgerError("JSON_TOO_LARGE", f"{what} is over {MAX_DOCUMENT_BYTES} bytes")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LedgerError("JSON_INVALID", f"{what} is not valid UTF-8") from exc
    if len(text) > MAX_DOCUMENT_BYTES:
        raise LedgerError("JSON_TOO_LARGE", f"{what} is over {MAX_DOCUMENT_BYTES} characters")
    try:
        parsed = _DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise LedgerError("JSON_INVALID", f"{what} is not JSON: {exc}") from exc
    return check_json(parsed, what=what)


def loads_object(text: str | bytes, *, what: str = "document") -> JsonObject:
    value = loads_document(text, what=what)
    if not isinstance(value, dict):
        raise LedgerError("JSON_NOT_OBJECT", f"{what} must be a JSON object")
    return value


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


# One decoder for every parse: `json.loads` with an argument builds a new decoder per call.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
