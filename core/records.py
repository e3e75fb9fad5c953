"""Building a frozen record of a table row from its columns by name; `record_columns` is what the
shell checks a statement's selected columns against."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

T = TypeVar("T")


_COLUMNS: dict[type, tuple[str, ...]] = {}


def record_columns(cls: type) -> tuple[str, ...]:
    """The record's field names in order: the columns a statement read into it must select."""
    names = _COLUMNS.get(cls)
    if names is None:
        fields = getattr(cls, "_fields", None)  # a NamedTuple record
        names = _COLUMNS[cls] = tuple(fields if fields is not None else attrs.fields_dict(cls))
    return names


def record_from_row(cls: type[T], row: Mapping[str, Any]) -> T:
    """A record built from the row's columns of the same names (others are ignored)."""
    return cls(**{name: row[name] for name in record_columns(cls)})
