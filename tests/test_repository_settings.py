"""A governed repository's settings live in the ledger (0.x migration 0013), through real git, real
repositories and both engines: set by the owner at `repo add` and by `repo settings` (a sealed
compare-and-swap on the repository's revision, idempotent by key), held by `verify` against
their seals (a column or the baseline changed by hand is reported), refused with a stable code
when bad (changing nothing), and no longer read from the repository's git config, whose old
`aios-ledger.*` keys `repo show` names with the command that moves them.

Figures: 10 bad values refused through the command line (`REPOSITORY_SETTING_INVALID` 9,
`INPUT_UNREADABLE` 1) and 3 through the library (two baselines that are not detect-secrets',
a change of nothing), each changing nothing; per engine, 9 tamperings of the settings columns
(one per column, and a default written over a sealed setting) and 2 of a settings-change row,
each reported by `verify`.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.git.records import GOVERNED_REPOSITORIES
from aios_ledger.core.git.settings import DEFAULT_SETTINGS, MIGRATED_DEFAULTS
from aios_ledger.core.log.rows import row_digest
from aios_ledger.core.log.state import stored_row_state
from aios_ledger.core.sealed_tables import SEALED_TABLES
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.repos import (
    add_repository,
    change_repository_settings,
    show_repository,
)
from aios_ledger.shell.log.verification import verify_log
from cli_runner import CliResult, run_cli
from conftest import both_engines
from git_support import REPOSITORY, git, make_repository
from legacy_fixtures import dump, rows
from test_log_support import raw_rows, tamper

pytest_generate_tests = both_engines

AWS_KEY = "AKIA" + "Z7VRSQ5TJRVJ6ABC"  # made up: the scanner knows its shape


def make_baseline(folder: Path, files: dict[str, str]) -> str:
    """A real `detect-secrets scan` baseline of `files`, as its text."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    scanned = subprocess.run(
        [sys.executable, "-m", "detect_secrets", "scan", "--all-files"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    assert scanned.returncode == 0, scanned.stderr
    return scanned.stdout


def report(target: Path | str) -> dict[str, Any]:
    with Database(target) as db:
        return verify_log(db).public()


def findings(target: Path | str) -> set[tuple[str, str | None, str | None]]:
    return {
        (finding["code"], finding.get("table"), finding.get("key"))
        for finding in report(target)["findings"]
    }


def payloads(target: Path | str, event_type: str) -> list[dict[str, Any]]:
    found = rows(
        target,  # type: ignore[arg-type]
        "SELECT payload_json FROM events WHERE event_type = ? ORDER BY event_id",
        (event_type,),
    )
    return [json.loads(payload) for (payload,) in found]


def refused(work: Any) -> LedgerError:
    with pytest.raises(LedgerError) as caught:
        work()
    return caught.value


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    return make_repository(tmp_path)[0]


def test_settings_given_at_registration_are_sealed_and_replayed(
    ledger_target: Path, bare: Path, tmp_path: Path
) -> None:
    baseline = make_baseline(tmp_path / "scanned", {"tests/fixture.py": f"KEY = '{AWS_KEY}'\n"})
    given = {"secrets_baseline": baseline, "scan_max_bytes": 1000, "allow_gitlinks": True}
    with Database(ledger_target) as db:
        answer = add_repository(db, REPOSITORY, str(bare), settings=given)
        shown = show_repository(db, REPOSITORY)
        # The same registration again is a replay, with or without the settings it gave.
        again = add_repository(db, REPOSITORY, str(bare), settings={"scan_max_bytes": 1000})
        bare_again = add_repository(db, REPOSITORY, str(bare))
        conflict = refused(
            lambda: add_repository(db, REPOSITORY, str(bare), settings={"scan_max_bytes": 999})
        )
    digest = hashlib.sha256(baseline.encode()).hexdigest()
    expected = {
        **DEFAULT_SETTINGS.public(),
        "secrets_baseline_sha256": digest,
        "scan_max_bytes": 1000,
        "allow_gitlinks": True,
    }
    assert answer["settings"] == expected and answer["revision"] == 1
    assert shown["settings"] == expected and shown["warnings"] == []
    assert again["idempotent"] is True and bare_again["idempotent"] is True
    assert conflict.code == "REPOSITORY_CONFLICT" and "repo settings" in conflict.detail
    (registered,) = payloads(ledger_target, "REPOSITORY_REGISTERED")
    assert registered["settings"] == expected
    # The baseline's text itself is in the row (sealed by the row's digest), not its path.
    (stored,) = raw_rows(
        ledger_target,
        "SELECT secrets_baseline_json, secrets_baseline_sha256 FROM governed_repositories",
    )
    assert tuple(stored) == (baseline, digest)
    assert report(ledger_target)["intact"] is True


def test_a_change_is_a_sealed_compare_and_swap_idempotent_by_key(
    ledger_target: Path, bare: Path
) -> None:
    with Database(ledger_target) as db:
        add_repository(db, REPOSITORY, str(bare))

        def change(key: str, settings: dict[str, Any], **extra: Any) -> Any:
            return change_repository_settings(
                db, REPOSITORY, settings, idempotency_key=key, **extra
            )

        first = change("raise", {"scan_max_seconds": 60, "agent_scan_window_seconds": 600})
        replay = change("raise", {"scan_max_seconds": 60, "agent_scan_window_seconds": 600})
        other = refused(lambda: change("raise", {"scan_max_seconds": 61}))
        stale = refused(lambda: change("late", {"scan_max_bytes": 5}, expected_revision=1))
        current = change("gitlinks", {"allow_gitlinks": True}, expected_revision=2)
        missing = refused(
            lambda: change_repository_settings(
                db, "acme/none", {"allow_gitlinks": True}, idempotency_key="none"
            )
        )
        shown = show_repository(db, REPOSITORY)
    assert first["revision"] == 2 and first["idempotent"] is False
    assert first["changed"] == ["scan_max_seconds", "agent_scan_window_seconds"]
    assert first["settings"]["scan_max_seconds"] == 60.0
    assert replay == {**first, "idempotent": True}
    assert other.code == "IDEMPOTENCY_CONFLICT"
    assert stale.code == "REVISION_CONFLICT"
    assert current["revision"] == 3 and current["changed"] == ["allow_gitlinks"]
    assert missing.code == "REPOSITORY_NOT_FOUND"
    settings = shown["settings"]
    assert isinstance(settings, dict)
    assert shown["revision"] == 3 and settings["allow_gitlinks"] is True
    assert settings["agent_scan_window_seconds"] == 600
    # One sealed event per change (the replay and the refusals wrote none).
    changes = payloads(ledger_target, "REPOSITORY_SETTINGS_CHANGED")
    assert [(c["idempotency_key"], c["revision"], c["changed"]) for c in changes] == [
        ("raise", 2, ["scan_max_seconds", "agent_scan_window_seconds"]),
        ("gitlinks", 3, ["allow_gitlinks"]),
    ]
    assert changes[-1]["settings"] == settings
    assert report(ledger_target)["intact"] is True


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("secrets_baseline_json", '{"results": {}}'),
        ("secrets_baseline_sha256", "0" * 64),
        ("scan_max_bytes", 1 << 40),
        ("scan_max_seconds", 86400.0),
        ("allow_gitlinks", 1),
        ("agent_scan_max_bytes", 1 << 40),
        ("agent_scan_max_seconds", 86400.0),
        ("agent_scan_window_seconds", 60),
        # A default written by hand over a setting the owner sealed is reported too.
        ("scan_max_bytes", MIGRATED_DEFAULTS["scan_max_bytes"]),
    ],
    ids=lambda value: str(value)[:24],
)
def test_a_setting_changed_by_hand_is_reported_by_verify(
    ledger_target: Path, bare: Path, tmp_path: Path, column: str, value: Any
) -> None:
    baseline = make_baseline(tmp_path / "scanned", {"a.py": f"KEY = '{AWS_KEY}'\n"})
    with Database(ledger_target) as db:
        add_repository(db, REPOSITORY, str(bare))
        change_repository_settings(
            db,
            REPOSITORY,
            {"secrets_baseline": baseline, "scan_max_bytes": 4096},
            idempotency_key="owner",
        )
    assert report(ledger_target)["intact"] is True
    tamper(ledger_target, (f"UPDATE governed_repositories SET {column} = ?", (value,)))
    assert findings(ledger_target) == {("STATE_MISMATCH", GOVERNED_REPOSITORIES, REPOSITORY)}


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE repository_settings_changes SET request_sha256 = 'sha256:0'",
        "DELETE FROM repository_settings_changes",
    ],
    ids=["changed", "deleted"],
)
def test_a_settings_change_row_tampered_with_is_reported(
    ledger_target: Path, bare: Path, statement: str
) -> None:
    with Database(ledger_target) as db:
        add_repository(db, REPOSITORY, str(bare))
        change_repository_settings(db, REPOSITORY, {"scan_max_bytes": 5}, idempotency_key="k")
    tamper(ledger_target, (statement, ()))
    assert findings(ledger_target) == {("STATE_MISMATCH", "repository_settings_changes", "k")}


def test_a_row_sealed_before_the_settings_existed_verifies_at_their_defaults() -> None:
    """Migration 0013 gives a repository registered before it the defaults; its seal, taken
    without the columns, still proves it while they hold them (and not once one is changed)."""
    columns = {
        "name": REPOSITORY,
        "path": "/srv/git/widgets.git",
        "head_branch": "main",
        "protected_json": '["main","master","release/*"]',
        "revision": 1,
        "created_at": "2026-11-30T12:00:00.000Z",
        "updated_at": "2026-11-30T12:00:00.000Z",
    }
    sealed = row_digest(GOVERNED_REPOSITORIES, REPOSITORY, columns)
    migrated = {**columns, **MIGRATED_DEFAULTS}
    assert stored_row_state(SEALED_TABLES[GOVERNED_REPOSITORIES], migrated, sealed) == (
        REPOSITORY,
        sealed,
    )
    for name, value in (("scan_max_bytes", 1), ("allow_gitlinks", 1), ("scan_max_seconds", 1.5)):
        widened = {**migrated, name: value}
        assert (
            stored_row_state(SEALED_TABLES[GOVERNED_REPOSITORIES], widened, sealed)[1] != sealed
        ), name


# ---------------------------------------------------------------------------------------------
# bad values, refused with a code and changing nothing


def cli(target: Path | str, *argv: str) -> CliResult:
    return run_cli("--db", target, *argv)


@pytest.fixture
def registered(tmp_path: Path, bare: Path) -> Path:
    target = tmp_path / "ledger.db"
    assert cli(target, "init").returncode == 0
    added = cli(target, "repo", "add", REPOSITORY, str(bare), "--scan-max-bytes", "4096")
    assert added.returncode == 0, added.stderr
    return target


def _bad_baselines(folder: Path) -> dict[str, Path]:
    folder.mkdir()
    files = {
        "not-json": "{not json",
        "no-results": '{"plugins_used": []}',
        "runs-a-file": json.dumps(
            {"results": {}, "plugins_used": [{"name": "Mine", "path": "file:///tmp/mine.py"}]}
        ),
        "not-utf8": None,
    }
    paths = {}
    for name, text in files.items():
        path = folder / f"{name}.baseline"
        if text is None:
            path.write_bytes(b'{"results": {"\xff": []}}')
        else:
            path.write_text(text)
        paths[name] = path
    return paths


@pytest.mark.parametrize(
    ("options", "code"),
    [
        (["--scan-max-bytes", "0"], "REPOSITORY_SETTING_INVALID"),
        (["--scan-max-bytes", "-5"], "REPOSITORY_SETTING_INVALID"),
        (["--scan-max-bytes", "ten"], "REPOSITORY_SETTING_INVALID"),
        (["--scan-max-seconds", "nan"], "REPOSITORY_SETTING_INVALID"),
        (["--agent-scan-max-seconds", "inf"], "REPOSITORY_SETTING_INVALID"),
        (["--agent-scan-window", "59"], "REPOSITORY_SETTING_INVALID"),
        (["--secrets-baseline", "{baselines}/not-json.baseline"], "REPOSITORY_SETTING_INVALID"),
        (["--secrets-baseline", "{baselines}/runs-a-file.baseline"], "REPOSITORY_SETTING_INVALID"),
        (["--secrets-baseline", "{baselines}/not-utf8.baseline"], "REPOSITORY_SETTING_INVALID"),
        (["--secrets-baseline", "{baselines}/missing.baseline"], "INPUT_UNREADABLE"),
    ],
    ids=lambda value: "-".join(value) if isinstance(value, list) else value,
)
def test_bad_values_are_refused_with_a_code_and_change_nothing(
    registered: Path, tmp_path: Path, options: list[str], code: str
) -> None:
    """Through the command line, on SQLite: refused before the store is written."""
    baselines = _bad_baselines(tmp_path / "baselines")
    argv = [option.replace("{baselines}", str(baselines["not-json"].parent)) for option in options]
    before = dump(registered)
    done = cli(registered, "repo", "settings", REPOSITORY, "--idempotency-key", "bad", *argv)
    assert done.returncode != 0 and f"{code}: " in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert dump(registered) == before


def test_bad_baselines_and_empty_changes_are_refused_by_the_library(
    ledger_target: Path, bare: Path, tmp_path: Path
) -> None:
    baselines = _bad_baselines(tmp_path / "baselines")
    with Database(ledger_target) as db:
        add_repository(db, REPOSITORY, str(bare))
        before = show_repository(db, REPOSITORY)
        for settings in (
            {"secrets_baseline": baselines["no-results"].read_text()},
            {"secrets_baseline": '{"results": {"a.py": [{"type": 1}]}}'},
            {},
        ):
            error = refused(
                lambda s=settings: change_repository_settings(
                    db, REPOSITORY, s, idempotency_key="bad"
                )
            )
            assert error.code == "REPOSITORY_SETTING_INVALID", settings
        assert show_repository(db, REPOSITORY) == before
    assert payloads(ledger_target, "REPOSITORY_SETTINGS_CHANGED") == []


# ---------------------------------------------------------------------------------------------
# the git config an older release read


def test_repo_show_names_settings_left_in_the_git_config_and_the_command_moves_them(
    registered: Path, bare: Path, tmp_path: Path
) -> None:
    baseline = tmp_path / "secrets.baseline"
    baseline.write_text(make_baseline(tmp_path / "scanned", {"a.py": "x = 1\n"}))
    git("--git-dir", str(bare), "config", "aios-ledger.scanMaxBytes", "100")
    git("--git-dir", str(bare), "config", "aios-ledger.secretsBaseline", str(baseline))
    git("--git-dir", str(bare), "config", "--bool", "aios-ledger.allowGitlinks", "true")
    shown = json.loads(cli(registered, "repo", "show", REPOSITORY).stdout)
    (warning,) = shown["warnings"]
    assert "aios-ledger.scanmaxbytes = '100'" in warning and "no longer reads" in warning
    # The settings in the ledger are untouched by the git config.
    assert shown["settings"]["scan_max_bytes"] == 4096
    assert shown["settings"]["allow_gitlinks"] is False
    listed = json.loads(cli(registered, "repo", "list").stdout)
    assert listed[0]["warnings"] == [warning]
    # The notice's own commands move them: `repo settings ...`, then git's.
    move = warning.split("`aios-ledger ", 1)[1].split("`", 1)[0]
    moved = cli(registered, *shlex.split(move))
    assert moved.returncode == 0, moved.stderr
    assert sorted(json.loads(moved.stdout)["changed"]) == [
        "allow_gitlinks",
        "scan_max_bytes",
        "secrets_baseline_sha256",
    ]
    git("--git-dir", str(bare), "config", "--remove-section", "aios-ledger")
    after = json.loads(cli(registered, "repo", "show", REPOSITORY).stdout)
    assert after["warnings"] == []
    assert after["settings"]["scan_max_bytes"] == 100
    assert after["settings"]["allow_gitlinks"] is True
    assert report(registered)["intact"] is True
