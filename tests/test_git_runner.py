"""git as the ledger runs it: an argument list (never a shell), a clean environment (nothing of
the caller's GIT_*, no global or system configuration), bounded output."""

from __future__ import annotations

from pathlib import Path

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.shell.git.runner import check_ref_format, clean_environment, run_git
from git_support import make_repository


def test_the_callers_git_environment_is_not_inherited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare, base = make_repository(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = from-the-callers-home\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere.git"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'user.name'='from-the-callers-environment'")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.hooksPath")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(tmp_path))
    env = clean_environment()
    assert not [
        name
        for name in env
        if name.startswith("GIT_")
        and name
        not in {
            "GIT_CONFIG_NOSYSTEM",
            "GIT_CONFIG_GLOBAL",
            "GIT_TERMINAL_PROMPT",
            "GIT_ASKPASS",
            "GIT_NO_REPLACE_OBJECTS",
        }
    ]
    assert env["HOME"] != str(home)
    found = run_git(["--git-dir", str(bare), "rev-parse", "HEAD"]).text.strip()
    assert found == base
    name = run_git(["--git-dir", str(bare), "config", "--get", "user.name"], check=False)
    assert name.returncode == 1 and name.stdout == b""
    hooks = run_git(["--git-dir", str(bare), "config", "--get", "core.hooksPath"]).text.strip()
    assert hooks == "/dev/null"


def test_arguments_are_never_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for hostile in (f"refs/heads/$(touch {marker})", f"refs/heads/x;touch {marker}"):
        try:
            check_ref_format(hostile)
        except LedgerError as hostile_refused:
            assert hostile_refused.code == "REF_NAME_INVALID"
    assert not marker.exists()
    with pytest.raises(LedgerError) as refused:
        check_ref_format("--help")
    assert refused.value.code == "REF_NAME_INVALID"


def test_output_is_bounded(tmp_path: Path) -> None:
    bare, base = make_repository(tmp_path, {"big.txt": "x" * 100_000})
    with pytest.raises(LedgerError) as refused:
        run_git(["--git-dir", str(bare), "show", f"{base}:big.txt"], max_output=10_000)
    assert refused.value.code == "GIT_OUTPUT_TOO_LARGE"
    with pytest.raises(LedgerError) as failed:
        run_git(["--git-dir", str(bare), "rev-parse", "--verify", "no-such-thing"])
    assert failed.value.code == "GIT_FAILED"
