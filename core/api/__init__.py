"""API access: tokens, roles and what each role may do (pure)."""

import typing

if typing.TYPE_CHECKING:
    from aios_ledger.core.api.tokens import (
        ApiTokenAnswer,
        ApiTokenRow,
        TokenIssueRequest,
        TokenRevokeRequest,
        TokenState,
        decide_issue_token,
        decide_revoke_token,
    )

__all__ = [
    "ApiTokenRow",
    "TokenState",
    "TokenIssueRequest",
    "TokenRevokeRequest",
    "decide_issue_token",
    "decide_revoke_token",
    "ApiTokenAnswer",
]

if not typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Each public name, loaded on first use (PEP 562): the core's modules import each
        other's across its subpackages, so a package that imported all of its modules as it is
        imported would close import cycles. The imports above, for type checkers, are these."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from aios_ledger.core.api.tokens import (  # noqa: F401
            ApiTokenAnswer,
            ApiTokenRow,
            TokenIssueRequest,
            TokenRevokeRequest,
            TokenState,
            decide_issue_token,
            decide_revoke_token,
        )

        loaded = locals()
        globals().update({export: loaded[export] for export in __all__})
        return loaded[name]

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
