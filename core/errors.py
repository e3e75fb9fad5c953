"""The single error root of the ledger.

Every refusal, whatever its cause, is a `LedgerError` whose `code` is a stable UPPER_SNAKE
string: the API, the command line and the tests all match on it. `str(error)` starts with the
code so that a log line or a `pytest.raises(match=...)` can find it.
"""

from __future__ import annotations

import re

_CODE_SHAPE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$")


class LedgerError(Exception):
    """A refusal with a stable code and a human-readable detail."""

    def __init__(self, code: str, detail: str = "") -> None:
        if not _CODE_SHAPE.fullmatch(code):
            raise ValueError(f"error codes are UPPER_SNAKE, got {code!r}")
        self.code = code
        self.detail = detail
        super().__init__(code, detail)

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}" if self.detail else self.code

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.detail!r})"


class InitialExecutionProjectionError(LedgerError):
    """A refusal of the initial execution projection or its source-capture recovery."""
