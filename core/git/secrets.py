"""What the secret scanner reads, and under what budget: an agent can hide a secret in any commit,
message, binary or encoded blob, so each is read as text."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator

import attrs
from aios_ledger.core.errors import LedgerError, RetryLaterError

DEFAULT_SCAN_BYTES = 64 * 1024 * 1024
DEFAULT_SCAN_SECONDS = 20.0
# An encoded run shorter than this cannot hold a key worth finding; longer ones are decoded.
MIN_ENCODED = 40
# A blob inside a blob inside a file is read; deeper nesting is not (each level costs a scan).
MAX_DECODE_DEPTH = 2
# A binary file is read as its runs of printable characters at least this long (`strings`).
MIN_PRINTABLE = 8
# Long lines are read in overlapping windows, so the scan can stop between them.
LINE_WINDOW = 4096
WINDOW_OVERLAP = 512

_PRINTABLE = re.compile(rb"[\t\x20-\x7e]{%d,}" % MIN_PRINTABLE)
_BASE64_RUN = re.compile(rf"[A-Za-z0-9+/_-]{{{MIN_ENCODED},}}={{0,2}}")
_BASE64_LINE = re.compile(r"^[ \t]*([A-Za-z0-9+/_-]{16,}={0,2})[ \t]*$")
_HEX_RUN = re.compile(rf"\b(?:[0-9a-fA-F]{{2}}){{{MIN_ENCODED // 2},}}\b")


@attrs.frozen
class ScanBudget:
    """How much scanning one proposal may cost; `agent_*` set: the agent's window cut it."""

    max_bytes: int = DEFAULT_SCAN_BYTES
    max_seconds: float = DEFAULT_SCAN_SECONDS
    agent_bytes: int | None = None
    agent_seconds: float | None = None
    agent_id: str | None = None
    retry_after: int = 1

    def _agent_refusal(self, what: str) -> RetryLaterError:
        return RetryLaterError(
            "AGENT_SCAN_BUDGET_EXCEEDED",
            f"the proposal {what}, over what agent {self.agent_id!r} has left of its scan"
            f" budget for this repository: try again in {self.retry_after} seconds, or ask"
            " the owner to raise the repository's agent scan budget",
            retry_after=self.retry_after,
        )

    def require_bytes(self, spent: int) -> None:
        if spent <= self.max_bytes:
            return
        if self.agent_bytes is not None and self.agent_bytes == self.max_bytes:
            raise self._agent_refusal(f"brings {spent} bytes to scan")
        raise LedgerError(
            "SCAN_BUDGET_EXCEEDED",
            f"the proposal brings {spent} bytes to scan, over the budget of {self.max_bytes}:"
            " propose less, or ask the owner to raise the repository's scan_max_bytes"
            " (`aios-ledger repo settings NAME --scan-max-bytes N`)",
        )

    def require_seconds(self, spent: float) -> None:
        if spent <= self.max_seconds:
            return
        if self.agent_seconds is not None and self.agent_seconds == self.max_seconds:
            raise self._agent_refusal(f"took over {self.max_seconds:g} seconds to scan")
        raise LedgerError(
            "SCAN_BUDGET_EXCEEDED",
            f"scanning the proposal took over {self.max_seconds:g} seconds: propose less,"
            " or ask the owner to raise the repository's scan_max_seconds"
            " (`aios-ledger repo settings NAME --scan-max-seconds S`)",
        )


def readable_text(data: bytes) -> str:
    """A file's text, or its printable runs: a key in a binary file is still a key."""
    if b"\0" not in data:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return "\n".join(run.decode("ascii") for run in _PRINTABLE.findall(data))


def line_windows(line: str) -> Iterator[str]:
    """A line in pieces of at most `LINE_WINDOW` characters, each overlapping the one before."""
    if len(line) <= LINE_WINDOW:
        yield line
        return
    step = LINE_WINDOW - WINDOW_OVERLAP
    for start in range(0, len(line) - WINDOW_OVERLAP, step):
        yield line[start : start + LINE_WINDOW]


def encoded_runs(text: str) -> Iterator[tuple[int, str]]:
    """The base64 and hex runs of `text` worth decoding, with their 1-based line."""
    wrapped: list[str] = []
    wrapped_from = 0
    for number, line in enumerate(text.splitlines(), start=1):
        whole = _BASE64_LINE.match(line)
        if whole:
            if not wrapped:
                wrapped_from = number
            wrapped.append(whole.group(1))
            continue
        if len(wrapped) > 1:
            yield wrapped_from, "".join(wrapped)
        wrapped = []
        for found in _BASE64_RUN.finditer(line):
            yield number, found.group(0)
        for found in _HEX_RUN.finditer(line):
            yield number, found.group(0)
    if len(wrapped) > 1:
        yield wrapped_from, "".join(wrapped)
    elif wrapped and len(wrapped[0]) >= MIN_ENCODED:
        yield wrapped_from, wrapped[0]


def decode_run(run: str) -> bytes | None:
    """The bytes a run encodes (hex, base64 or its URL-safe form), or None when it is none."""
    if len(run) % 2 == 0 and all(c in "0123456789abcdefABCDEF" for c in run):
        return bytes.fromhex(run)
    padded = run + "=" * (-len(run) % 4)
    for alphabet in (None, b"-_"):
        try:
            return base64.b64decode(padded, altchars=alphabet, validate=True)
        except (binascii.Error, ValueError):
            continue
    return None
