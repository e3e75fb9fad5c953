"""Loading the result contracts (JSON Schema files shipped in `aios_ledger.core.contracts`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from aios_ledger.core import LedgerError
from aios_ledger.core.contracts.checks import check_schema_well_formed

SOURCE_CAPTURE_RESULT = "source_capture_result.v1"


@cache
def result_contract(name: str) -> Mapping[str, Any]:
    entry = resources.files("aios_ledger.core.contracts") / f"{name}.json"
    if not entry.is_file():
        raise LedgerError("RESULT_CONTRACT_UNKNOWN", f"no result contract {name!r}")
    schema = json.loads(entry.read_text("utf-8"))
    check_schema_well_formed(schema, code="RESULT_CONTRACT_UNKNOWN")
    return schema  # type: ignore[no-any-return]
