"""JSON Schema result contracts, one file per action, shipped as package data, and the pure
checks of a schema and of a document against it."""

import typing

if typing.TYPE_CHECKING:
    from aios_ledger.core.contracts.checks import (
        check_schema_well_formed,
        contract_violations,
        require_contract,
    )

__all__ = [
    "check_schema_well_formed",
    "contract_violations",
    "require_contract",
]

if not typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Each public name, loaded on first use (PEP 562): the core's modules import each
        other's across its subpackages, so a package that imported all of its modules as it is
        imported would close import cycles. The imports above, for type checkers, are these."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from aios_ledger.core.contracts.checks import (  # noqa: F401
            check_schema_well_formed,
            contract_violations,
            require_contract,
        )

        loaded = locals()
        globals().update({export: loaded[export] for export in __all__})
        return loaded[name]

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
