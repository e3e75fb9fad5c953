"""How a task's results are judged and a verifier's judgement of one, `StrEnum`s so that rows,
digests and answers hold their plain text."""

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
