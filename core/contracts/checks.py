"""Checking a JSON document against a result contract (a JSON Schema); the shell reads the schema
files, so that the core never touches the filesystem."""

from __future__ import annotations

from collections.abc import Mapping

from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonValue


def check_schema_well_formed(schema: object, *, code: str) -> None:
    if not isinstance(schema, Mapping):
        raise LedgerError(code, "a JSON Schema must be an object")
    import jsonschema  # here, not at the top: see `contract_violations`
    from jsonschema.exceptions import SchemaError

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise LedgerError(code, f"not a valid JSON Schema: {exc.message}") from None


def contract_violations(schema: Mapping[str, object], document: JsonValue) -> list[str]:
    """Every violation as `$.json.path: message`, sorted, so that errors are deterministic."""
    # Imported here, not with the core: most command-line processes check no contract.
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    found = [f"{error.json_path}: {error.message}" for error in validator.iter_errors(document)]
    return sorted(found)


def require_contract(
    schema: Mapping[str, object],
    document: JsonValue,
    *,
    code: str,
    error: type[LedgerError] = LedgerError,
) -> None:
    violations = contract_violations(schema, document)
    if violations:
        more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
        raise error(code, violations[0] + more)
