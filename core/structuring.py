"""One strict converter, untrusted mappings in and frozen attrs records out, whose hooks refuse
every coercion (7 is not "7") so that what is digested is what was sent."""

from __future__ import annotations

import enum
import functools
import types
import typing
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Self, TypeVar, get_args, get_origin

import attrs
import cattrs
from aios_ledger.core.errors import LedgerError
from cattrs.errors import (
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.fns import identity
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

R = TypeVar("R")
Check = Callable[[Any], Any]
Path = tuple[str | int, ...]

# `attrs.field(metadata=NOT_PUBLIC)`: structured from input, left out of the public form.
_PUBLIC = "public"
NOT_PUBLIC: Mapping[str, object] = {_PUBLIC: False}

converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)


class FieldRefused(Exception):
    """A check's refusal of one value; its message says what the value must be."""


class Constraint:
    """`Annotated` metadata that checks a field's value, else `FieldRefused`."""

    def __call__(self, value: Any) -> Any:
        raise NotImplementedError

    def json_schema(self) -> dict[str, Any]:
        """What `__call__` accepts, as JSON Schema keywords (`core/schemas.py`)."""
        raise NotImplementedError(f"{type(self).__name__} does not describe itself")


@attrs.frozen
class Problem:
    """One refused part of an input: where (field names and list indices), and why."""

    path: Path
    message: str

    def at(self, root: str) -> str:
        """The path below `root`, as `task.required_capabilities[2]`."""
        text = root
        for step in self.path:
            text += f"[{step}]" if isinstance(step, int) else f".{step}" if text else step
        return text


# What a record's refusal raises, from its name and every problem found.
Refusal = Callable[[str, Sequence[Problem]], LedgerError]


def refuse_as(error: type[LedgerError], code: str) -> Refusal:
    """The usual refusal: one `error(code)` whose detail names each problem by its path."""

    def refuse(what: str, problems: Sequence[Problem]) -> LedgerError:
        return error(
            code, "; ".join(f"{problem.at(what)}: {problem.message}" for problem in problems)
        )

    return refuse


FIELDS_INVALID = refuse_as(LedgerError, "FIELDS_INVALID")


# --- the API --------------------------------------------------------------------------------


class Structured:
    """A record `from_mapping` reads with `structure`, its refusals naming it `WHAT`, and
    `public` writes back."""

    __slots__ = ()
    WHAT: ClassVar[str] = "arguments"

    @classmethod
    def from_mapping(cls, raw: object) -> Self:
        return structure(raw, cls, what=cls.WHAT)

    def public(self) -> dict[str, Any]:
        return unstructure(self)


def structure(raw: object, record: type[R], *, what: str, refuse: Refusal = FIELDS_INVALID) -> R:
    """The record `raw` describes, or `refuse(what, problems)`; nothing else ever escapes."""
    hook = _RECORD_HOOKS.get(record) or _record_hook_of(record)
    try:
        built: R = hook(raw, record)
    except (FieldRefused, ClassValidationError, IterableValidationError) as refused:
        raise refuse(what, list(problems_of(refused))) from None
    _remember(built)
    return built


# Records `structure` built, by identity (an equal one may hold True for 1), not read twice.
_STRUCTURED: dict[int, weakref.ref[Any]] = {}


def _remember(record: object) -> None:
    key = id(record)
    try:
        known = weakref.ref(record, lambda _: _STRUCTURED.pop(key, None))
    except TypeError:  # no weak references: checked whenever it is asked
        return
    _STRUCTURED[key] = known


def was_structured(record: object) -> bool:
    """Whether `structure` built `record` (so every field passed its hook)."""
    known = _STRUCTURED.get(id(record))
    return known is not None and known() is record


def unstructure(record: object) -> dict[str, Any]:
    """A record's public form: plain JSON values, fields marked `NOT_PUBLIC` left out."""
    return converter.unstructure(record)  # type: ignore[no-any-return]


def wire_form(record: object, *, without: Sequence[str] = ()) -> dict[str, Any]:
    """What a client sends for `record`, public and `NOT_PUBLIC` fields but `without`."""
    form = unstructure(record)
    kind: Any = type(record)
    for field in attrs.fields(kind):
        if field.init and field.metadata.get(_PUBLIC, True) is False:
            form[mapping_key(field)] = converter.unstructure(getattr(record, field.name))
    for key in without:
        form.pop(key, None)
    return form


def check_built(record: object, *, what: str, refuse: Refusal = FIELDS_INVALID) -> None:
    """Refuse a record built directly whose fields would not structure."""
    if was_structured(record):
        return
    problems = _problems_of_fields(record, ())
    if problems:
        raise refuse(what, problems)


def register_kind(
    kind: Any,
    check: Check,
    *,
    unstructure_as: Callable[[Any], Any] | None = None,
    schema: Mapping[str, Any] | None = None,
) -> None:
    """Make `check` the structure hook of a `NewType` kind, with its JSON Schema."""
    _KIND_CHECKS[kind] = check
    if schema is not None:
        _KIND_SCHEMAS[kind] = dict(schema)
    converter.register_structure_hook(kind, lambda value, _: check(value))
    converter.register_unstructure_hook(kind, unstructure_as or identity)


def problems_of(refused: BaseException, path: Path = ()) -> Iterator[Problem]:
    """Every problem in cattrs' error tree: unknown and missing fields, then refused values."""
    if isinstance(refused, ClassValidationError):
        noted, unnoted = refused.group_exceptions()
        unknown = sorted(
            str(name)
            for error in unnoted
            if isinstance(error, ForbiddenExtraKeysError)
            for name in error.extra_fields
        )
        keys = {field.name: mapping_key(field) for field in attrs.fields(refused.cl)}
        missing = [keys[note.name] for error, note in noted if isinstance(error, KeyError)]
        if unknown or missing:
            yield Problem(path, _field_names(unknown, missing))
        for error, note in noted:
            if not isinstance(error, KeyError):
                yield from problems_of(error, (*path, keys[note.name]))
        for error in unnoted:
            if not isinstance(error, ForbiddenExtraKeysError):
                yield from problems_of(error, path)
    elif isinstance(refused, IterableValidationError):
        noted_items, unnoted_items = refused.group_exceptions()
        for error, item in noted_items:
            yield from problems_of(error, (*path, item.index))
        for error in unnoted_items:
            yield from problems_of(error, path)
    elif isinstance(refused, FieldRefused):
        yield Problem(path, str(refused))
    else:  # not raised by a hook of this module: still a refusal of this value, never a crash
        yield Problem(path, f"is invalid ({type(refused).__name__}: {str(refused)[:200]})")


def _field_names(unknown: Sequence[str], missing: Sequence[str]) -> str:
    parts = [f"unknown {list(unknown)}"] if unknown else []
    parts += [f"missing {list(missing)}"] if missing else []
    return ", ".join(parts)


# --- strict primitive hooks -----------------------------------------------------------------


def _kind_name(value: object) -> str:
    return type(value).__name__


# Each primitive type and what its hook says a refused value must be.
_PRIMITIVES: Mapping[type, str] = {
    str: "a string",
    int: "an integer",
    bool: "true or false",
    float: "a floating-point number",
    type(None): "null",
}


def _primitive_hook(base: type) -> Callable[[Any, Any], Any]:
    what = _PRIMITIVES[base]

    def hook(value: Any, kind: Any) -> Any:
        if kind is not base:  # cattrs finds this hook for a subclass too: a StrEnum, an IntEnum
            return _enum_hook(kind)(value, kind)
        if not isinstance(value, base) or (base is int and isinstance(value, bool)):
            raise FieldRefused(f"must be {what}, got {_kind_name(value)}")
        return value

    return hook


for _base in _PRIMITIVES:
    converter.register_structure_hook(_base, _primitive_hook(_base))


def _items(value: Any, item_type: Any, container: Any) -> list[Any]:
    """Each item (a mapping's values) through its hook; every refusal noted with its index."""
    hook = converter.get_structure_hook(item_type)
    pairs = value.items() if isinstance(value, Mapping) else enumerate(value)
    items, errors = [], []
    for index, item in pairs:
        try:
            items.append(hook(item, item_type))
        except Exception as error:  # collected, as cattrs does, and rendered by `problems_of`
            note = IterableValidationNote(f"@ index {index!r}", index, item_type)
            error.__notes__ = [*getattr(error, "__notes__", []), note]
            errors.append(error)
    if errors:
        raise IterableValidationError(f"While structuring {container!r}", errors, container)
    return items


def _sequence_hook(container: Any) -> Callable[[Any, Any], Any]:
    """A JSON array for a list (or a tuple for a tuple); a set's items distinct."""
    origin = get_origin(container) or container
    args = get_args(container)
    item_type = args[0] if args else Any
    accepted: tuple[type, ...] = (list, tuple) if origin is tuple else (list,)
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis) and args:
        raise TypeError(
            f"{container!r}: only homogeneous tuples (tuple[X, ...]) are records' fields"
        )

    def hook(value: Any, _: Any) -> Any:
        if not isinstance(value, accepted):
            raise FieldRefused(f"must be a JSON array, got {_kind_name(value)}")
        items = _items(value, item_type, container)
        if origin in (set, frozenset):
            if len(set(items)) != len(items):
                raise FieldRefused("names an item twice")
            return origin(items)
        return items if origin is list else tuple(items)

    return hook


def _mapping_hook(container: Any) -> Callable[[Any, Any], Any]:
    args = get_args(container)
    value_type = args[1] if len(args) == 2 else Any

    def hook(value: Any, _: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise FieldRefused(f"must be a JSON object, got {_kind_name(value)}")
        keys = list(value)
        strange = [key for key in keys if not isinstance(key, str)]
        if strange:
            raise FieldRefused(f"has a key that is not text: {strange[0]!r:.80}")
        return dict(zip(keys, _items(value, value_type, container), strict=True))

    return hook


def _is_sequence(kind: Any) -> bool:
    return (get_origin(kind) or kind) in (list, tuple, set, frozenset)


def _is_mapping(kind: Any) -> bool:
    return (get_origin(kind) or kind) in (dict, Mapping)


converter.register_structure_hook_factory(_is_sequence, _sequence_hook)
converter.register_structure_hook_factory(_is_mapping, _mapping_hook)


@functools.cache
def _enum_hook(kind: Any) -> Callable[[Any, Any], Any]:
    """An enum from its value exactly, never another enum's member or another type's value."""
    if not (isinstance(kind, type) and issubclass(kind, enum.Enum)):
        raise TypeError(f"{kind!r} is a subclass of a primitive, not an enum: give it a kind")
    values = {member.value: member for member in kind}
    kinds = {type(value) for value in values}

    def hook(value: Any, _: Any) -> Any:
        if type(value) is kind:  # a member, as a record built directly holds it
            return value
        member = values.get(value) if type(value) in kinds else None
        if member is None:
            raise FieldRefused(f"must be one of {', '.join(map(str, values))}")
        return member

    return hook


def _is_enum(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, enum.Enum)


converter.register_structure_hook_factory(_is_enum, _enum_hook)
# An enum's public form is its plain value (a StrEnum would otherwise pass as itself, as text).
for _enum_base in (enum.Enum, enum.StrEnum, enum.IntEnum):
    converter.register_unstructure_hook(_enum_base, lambda member: member.value)


def _is_optional(kind: Any) -> bool:
    args = get_args(kind)
    return (
        get_origin(kind) in (typing.Union, types.UnionType)
        and len(args) == 2
        and (type(None) in args)
    )


def _optional_hook(kind: Any) -> Callable[[Any, Any], Any]:
    """`X | None`: None, or what `X`'s hook (found once, not per call) makes of the value."""
    (inner,) = [arg for arg in get_args(kind) if arg is not type(None)]
    hook = converter.get_structure_hook(inner)
    return lambda value, _: None if value is None else hook(value, inner)


converter.register_structure_hook_factory(_is_optional, _optional_hook)


# --- field kinds and constraints ------------------------------------------------------------

_KIND_CHECKS: dict[Any, Check] = {}
_KIND_SCHEMAS: dict[Any, dict[str, Any]] = {}


def kind_schema(kind: Any) -> dict[str, Any] | None:
    schema = _KIND_SCHEMAS.get(kind)
    return None if schema is None else dict(schema)


def _is_annotated(kind: Any) -> bool:
    return get_origin(kind) is Annotated


def _annotated_checks(kind: Any) -> tuple[Any, list[Check]]:
    base, *metadata = get_args(kind)
    checks: list[Check] = []
    for item in metadata:
        if isinstance(item, Constraint):
            checks.append(item)
        elif isinstance(item, typing.NewType):
            checks.append(_KIND_CHECKS[item])
    return base, checks


def _annotated_structure_hook(kind: Any) -> Callable[[Any, Any], Any]:
    """`Annotated[T, check, ...]`: the checks in order, or `T`'s own hook when none is a check."""
    base, checks = _annotated_checks(kind)
    if not checks:
        base_hook = converter.get_structure_hook(base)
        return lambda value, _: base_hook(value, base)
    if len(checks) == 1:
        (only,) = checks
        return lambda value, _: only(value)

    def hook(value: Any, _: Any) -> Any:
        for check in checks:
            value = check(value)
        return value

    return hook


def _annotated_unstructure_hook(kind: Any) -> Callable[[Any], Any]:
    base, *metadata = get_args(kind)
    for item in metadata:
        if isinstance(item, typing.NewType):
            return converter.get_unstructure_hook(item)
    return converter.get_unstructure_hook(base)


converter.register_structure_hook_factory(_is_annotated, _annotated_structure_hook)
converter.register_unstructure_hook_factory(_is_annotated, _annotated_unstructure_hook)


# --- records --------------------------------------------------------------------------------

_COMPLETE_FORMS: set[type] = set()
_RECORD_HOOKS: dict[type, Callable[[Any, Any], Any]] = {}


def complete_form(record: type[R]) -> type[R]:
    """Class decorator: the mapping must name every field, as stored forms do."""
    _COMPLETE_FORMS.add(record)
    return record


def is_complete_form(record: type) -> bool:
    return record in _COMPLETE_FORMS


def mapping_key(field: attrs.Attribute[Any]) -> str:
    """A field's key in mappings: its init name (`_id` is `id`)."""
    return field.alias or field.name


def _record_hook_of(record: type) -> Callable[[Any, Any], Any]:
    hook = converter.get_structure_hook(record)
    _RECORD_HOOKS[record] = hook
    return hook


def _record_structure_hook(record: type) -> Callable[[Any, Any], Any]:
    fields = [field for field in attrs.fields(record) if field.init]
    renamed = {f.name: override(rename=mapping_key(f)) for f in fields if mapping_key(f) != f.name}
    generated: Callable[[Any, Any], Any] = make_dict_structure_fn(
        record,
        converter,
        **renamed,  # type: ignore[arg-type]
    )
    keys = [mapping_key(field) for field in fields]
    known = frozenset(keys)
    required = [mapping_key(field) for field in fields if field.default is attrs.NOTHING]
    every = known if record in _COMPLETE_FORMS else None

    def hook(value: Any, _: Any) -> Any:
        if type(value) is not dict and not isinstance(value, Mapping):  # the usual case first
            raise FieldRefused(f"must be a JSON object, got {_kind_name(value)}")
        if every is not None and not every <= value.keys():
            unknown = sorted(str(key) for key in value.keys() - known)
            raise FieldRefused(_field_names(unknown, [key for key in keys if key not in value]))
        try:
            return generated(value, record)
        except TypeError:
            # cattrs before 25 misworded ForbiddenExtraKeysError for a key that is not text.
            extra = value.keys() - known
            if all(isinstance(key, str) for key in extra):
                raise
            unknown = sorted(str(key) for key in extra)
            raise FieldRefused(
                _field_names(unknown, [key for key in required if key not in value])
            ) from None

    return hook


def _record_unstructure_hook(record: type) -> Callable[[Any], Any]:
    fields = attrs.fields(record)
    omitted = {
        field.name: override(omit=True)
        for field in fields
        if not field.init or field.metadata.get(_PUBLIC, True) is False
    }
    renamed = {
        f.name: override(rename=mapping_key(f))
        for f in fields
        if f.name not in omitted and mapping_key(f) != f.name
    }
    return make_dict_unstructure_fn(record, converter, **omitted, **renamed)  # type: ignore[arg-type]


converter.register_structure_hook_factory(attrs.has, _record_structure_hook)
converter.register_unstructure_hook_factory(attrs.has, _record_unstructure_hook)


@attrs.frozen
class _FieldCheck:
    name: str
    key: str
    kind: Any
    nested: type | None
    read: Callable[[Any], Any] | None
    hook: Callable[[Any, Any], Any]


_FIELD_CHECKS: dict[type, tuple[_FieldCheck, ...]] = {}


def _problems_of_fields(record: object, path: Path) -> list[Problem]:
    problems: list[Problem] = []
    kind = type(record)
    for field in _FIELD_CHECKS.get(kind) or _field_checks_of(kind):
        value = getattr(record, field.name)
        if field.nested is not None and value is not None:
            if isinstance(value, field.nested):
                problems += _problems_of_fields(value, (*path, field.key))
            else:
                problems.append(Problem((*path, field.key), f"must be a {field.nested.__name__}"))
            continue
        if field.read is not None:
            try:  # noqa: SIM105 (a context manager per field of every transition costs)
                value = field.read(value)
            except Exception:  # not of its type: the structure hook says so
                pass
        try:
            field.hook(value, field.kind)
        except Exception as refused:  # FieldRefused, or cattrs' tree of them
            problems += problems_of(refused, (*path, field.key))
    return problems


def _field_checks_of(record: type) -> tuple[_FieldCheck, ...]:
    attrs.resolve_types(record)  # the modules use postponed annotations
    checks = []
    for field in attrs.fields(record):
        if field.init:
            read = converter.get_unstructure_hook(field.type)
            checks.append(
                _FieldCheck(
                    name=field.name,
                    key=mapping_key(field),
                    kind=field.type,
                    nested=_record_class(field.type),
                    # an enum's hook takes its members: no need to read them back
                    read=None if read is identity or _is_enum(field.type) else read,
                    hook=converter.get_structure_hook(field.type),
                )
            )
    _FIELD_CHECKS[record] = tuple(checks)
    return _FIELD_CHECKS[record]


def _record_class(kind: Any) -> type | None:
    for candidate in (kind, *get_args(kind)):
        if isinstance(candidate, type) and attrs.has(candidate):
            return candidate
    return None
