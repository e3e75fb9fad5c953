"""The single error root of the ledger: every refusal is a `LedgerError` with a stable UPPER_SNAKE
`code`, which `str(error)` starts with so that a log line or `pytest.raises(match=...)` finds it."""

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


class RetryLaterError(LedgerError):
    """A refusal that `retry_after` whole seconds lift; the API sends `Retry-After`."""

    def __init__(self, code: str, detail: str = "", *, retry_after: int = 1) -> None:
        super().__init__(code, detail)
        self.retry_after = max(1, int(retry_after))

    def __reduce__(self) -> tuple[object, ...]:
        return (_retry_later, (self.code, self.detail, self.retry_after))


class InitialExecutionProjectionError(LedgerError):
    """A refusal of the initial execution projection or its source-capture recovery."""


def _retry_later(code: str, detail: str, retry_after: int) -> RetryLaterError:
    return RetryLaterError(code, detail, retry_after=retry_after)


class AuxiliaryRunError(LedgerError):
    """A refusal or a terminal failure of an auxiliary run."""

    def __init__(self, code: str, detail: str = "", *, field: str | None = None) -> None:
        super().__init__(code, detail)
        self.field = field

    @classmethod
    def invalid_field(cls, field: str, detail: str) -> AuxiliaryRunError:
        return cls("INVALID_FIELD", f"{field}: {detail}", field=field)

    def __repr__(self) -> str:
        extra = f", field={self.field!r}" if self.field is not None else ""
        return f"{type(self).__name__}({self.code!r}, {self.detail!r}{extra})"
