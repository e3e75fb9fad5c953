"""API access: tokens, roles and what each role may do (pure)."""

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
