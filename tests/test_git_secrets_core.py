"""What the secret scanner reads, purely (`core.git.secrets`): a binary file as its printable
strings, long lines in overlapping windows, the encoded runs worth decoding and what they
decode to, and the budget (no git, no scanner; the repository's settings that set it:
tests/test_git_settings_core.py)."""

from __future__ import annotations

import base64

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.git.secrets import (
    LINE_WINDOW,
    MIN_ENCODED,
    WINDOW_OVERLAP,
    ScanBudget,
    decode_run,
    encoded_runs,
    line_windows,
    readable_text,
)

KEY_LINE = "-----BEGIN RSA " + "PRIVATE KEY-----"


def test_a_binary_file_is_read_as_its_printable_strings() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00IHDR\x00" + KEY_LINE.encode() + b"\x00\xff"
    assert KEY_LINE in readable_text(png).splitlines()
    assert readable_text(b"plain text\n") == "plain text\n"
    # Not UTF-8 without a NUL byte is binary too.
    assert readable_text(b"\xff\xfe" + KEY_LINE.encode()) == KEY_LINE


def test_a_long_line_is_read_in_overlapping_windows_that_hold_every_short_secret() -> None:
    line = "x" * (3 * LINE_WINDOW) + KEY_LINE + "y" * LINE_WINDOW
    windows = list(line_windows(line))
    assert all(len(window) <= LINE_WINDOW for window in windows)
    assert any(KEY_LINE in window for window in windows)
    assert "".join(w[: LINE_WINDOW - WINDOW_OVERLAP] for w in windows[:-1]) + windows[-1] == line
    assert list(line_windows("short")) == ["short"]


def test_encoded_runs_are_inline_runs_and_wrapped_lines_joined() -> None:
    wrapped = base64.encodebytes(KEY_LINE.encode() * 3).decode()
    inline = base64.b64encode(KEY_LINE.encode()).decode()
    text = f"first line\n{wrapped}config = '{inline}'\nshort = 'abc'\n"
    runs = dict((run, line) for line, run in encoded_runs(text))
    assert runs["".join(wrapped.split())] == 2
    assert runs[inline] == 2 + len(wrapped.splitlines())
    assert all(len(run) >= MIN_ENCODED for run in runs)


def test_runs_decode_as_hex_base64_or_its_url_safe_form_else_none() -> None:
    secret = KEY_LINE.encode() + b"\xfb\xff"
    assert decode_run(secret.hex()) == secret
    assert decode_run(base64.b64encode(secret).decode()) == secret
    assert decode_run(base64.urlsafe_b64encode(secret).decode().rstrip("=")) == secret
    assert decode_run("not*base64") is None


def test_the_budget_refuses_past_its_bytes_and_seconds() -> None:
    budget = ScanBudget(max_bytes=10, max_seconds=2.0)
    budget.require_bytes(10)
    budget.require_seconds(2.0)
    with pytest.raises(LedgerError) as refused:
        budget.require_bytes(11)
    assert str(refused.value).startswith("SCAN_BUDGET_EXCEEDED")
    with pytest.raises(LedgerError) as refused:
        budget.require_seconds(2.5)
    assert str(refused.value).startswith("SCAN_BUDGET_EXCEEDED")
