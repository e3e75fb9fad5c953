"""JSON Schema result contracts, one file per action, shipped as package data, and the pure
checks of a schema and of a document against it."""

from aios_ledger.core.contracts.checks import (
    check_schema_well_formed,
    contract_violations,
    require_contract,
)

__all__ = ["check_schema_well_formed", "contract_violations", "require_contract"]
