"""JSON Schemas (draft 2020-12) written from the records that structure input; a type it cannot
describe is a `TypeError`, never a schema that says less than the check."""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, get_args, get_origin

import attrs
from aios_ledger.core.structuring import (
    Constraint,
    converter,
    is_complete_form,
    kind_schema,
    mapping_key,
)

DIALECT = "https://json-schema.org/draft/2020-12/schema"

_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    bool: {"type": "boolean"},
    float: {"type": "number"},
    type(None): {"type": "null"},
}
_SEQUENCES = (list, tuple, set, frozenset)
_JSON = (type(None), bool, int, float, str, list, dict)

Definitions = dict[str, dict[str, Any]]


def record_schema(record: type) -> dict[str, Any]:
    """The whole schema document of one record: nested records under `$defs`."""
    definitions: Definitions = {}
    return _document(_object_of(record, definitions), definitions)


def batch_schema(record: type, *, max_items: int) -> dict[str, Any]:
    """One record, or a JSON array of 1 to `max_items` of them."""
    definitions: Definitions = {}
    item = _schema_of(record, definitions)
    batch = {"type": "array", "items": item, "minItems": 1, "maxItems": max_items}
    return _document({"anyOf": [item, batch]}, definitions)


def _document(body: dict[str, Any], definitions: Definitions) -> dict[str, Any]:
    document = {"$schema": DIALECT, **body}
    if definitions:
        document["$defs"] = definitions
    return document


def _schema_of(kind: Any, definitions: Definitions) -> dict[str, Any]:
    if kind is Any:
        return {}
    if get_origin(kind) is Annotated:
        return _annotated(kind, definitions)
    if isinstance(kind, typing.NewType):
        return _kind(kind)
    if isinstance(kind, type) and attrs.has(kind):
        name = kind.__name__
        if name not in definitions:
            definitions[name] = {}  # a record that nests itself refers to this entry
            definitions[name] = _object_of(kind, definitions)
        return {"$ref": f"#/$defs/{name}"}
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return {"enum": [member.value for member in kind]}
    if kind in _PRIMITIVES:
        return dict(_PRIMITIVES[kind])
    origin = get_origin(kind)
    args = get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema_of(arg, definitions) for arg in args]}
    if (origin or kind) in _SEQUENCES:
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = _schema_of(args[0], definitions)
        if (origin or kind) in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if (origin or kind) in (dict, Mapping):
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = _schema_of(args[1], definitions)
        return schema
    raise TypeError(f"no JSON Schema for {kind!r}")


def _kind(kind: Any) -> dict[str, Any]:
    schema = kind_schema(kind)
    if schema is None:
        raise TypeError(f"the kind {kind.__name__} was registered without a schema")
    return schema


def _annotated(kind: Any, definitions: Definitions) -> dict[str, Any]:
    """Each check's schema, in one object when their keywords agree, else all of them."""
    base, *metadata = get_args(kind)
    parts = [
        item.json_schema() if isinstance(item, Constraint) else _kind(item)
        for item in metadata
        if isinstance(item, Constraint | typing.NewType)
    ]
    if not parts:
        return _schema_of(base, definitions)
    merged: dict[str, Any] = {}
    for part in parts:
        if any(key in merged and merged[key] != value for key, value in part.items()):
            return {"allOf": parts}
        merged.update(part)
    return merged


def _object_of(record: type, definitions: Definitions) -> dict[str, Any]:
    attrs.resolve_types(record)  # the modules use postponed annotations
    complete = is_complete_form(record)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(record):
        if not field.init:
            continue
        key = mapping_key(field)
        schema = _schema_of(field.type, definitions)
        if complete or field.default is attrs.NOTHING:
            required.append(key)
        else:
            default = field_default(field)
            if isinstance(default, _JSON):
                schema = {**schema, "default": default}
        properties[key] = schema
    body: dict[str, Any] = {"title": record.__name__}
    # The docstring's first paragraph, on one line.
    description = " ".join((record.__doc__ or "").strip().split("\n\n")[0].split())
    if description:
        body["description"] = description
    body.update(type="object", properties=properties, required=required, additionalProperties=False)
    return body


def field_default(field: attrs.Attribute[Any]) -> Any:
    """A field's default as plain JSON (None for a factory that needs the record itself)."""
    default: Any = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        if default.takes_self:
            return None
        default = default.factory()
    return converter.unstructure(default)
