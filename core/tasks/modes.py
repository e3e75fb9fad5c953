"""How a task's results are judged (`VerificationMode`) and a verifier's judgement of one
(`VerifyDecision`): kinds of request fields, which the rows and the transition table read too.
`StrEnum`s: rows, digests and JSON answers hold their plain text."""

from __future__ import annotations

import enum


class VerifyDecision(enum.StrEnum):
    """A verifier's judgement of a submitted result (NEEDS_REWORK depends on attempts left)."""

    SUCCEEDED = "SUCCEEDED"
    NEEDS_REWORK = "NEEDS_REWORK"
    FAILED = "FAILED"


class VerificationMode(enum.StrEnum):
    """Who judges a task's results: a reviewer, or the ledger itself on arrival."""

    REVIEWER = "reviewer"
    AUTO = "auto"
