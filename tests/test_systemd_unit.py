"""The systemd units: the projection's (unprivileged, owner-credential bound), the worker's
(one instance per agent, stopped so that its tasks are released) and the API server's (the
projection's user, loopback only); all hardened and valid."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from aios_ledger.core.config import WorkerSettings
from aios_ledger.shell.work.worker import KILL_WAIT_SECONDS

ROOT = Path(__file__).resolve().parents[1]
UNIT = ROOT / "deploy/systemd/aios-agent-task-initial-execution-projection.service"
WORKER_UNIT = ROOT / "deploy/systemd/aios-ledger-worker@.service"
API_UNIT = ROOT / "deploy/systemd/aios-ledger-api.service"
UNITS = [UNIT, WORKER_UNIT, API_UNIT]
HAS_SYSTEMD = shutil.which("systemd-analyze") is not None
needs_systemd = pytest.mark.skipif(not HAS_SYSTEMD, reason="systemd-analyze is not installed")


def settings(unit: Path = UNIT) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in unit.read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, value = line.split("=", 1)
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def analysable(unit: Path, directory: Path) -> Path:
    """The unit as systemd-analyze checks it: a template as one of its instances, so that
    every `%i` is resolved as it will be."""
    if not unit.name.endswith("@.service"):
        return unit
    instance = directory / unit.name.replace("@.service", "@agent-7.service")
    shutil.copyfile(unit, instance)
    return instance


def test_unit_runs_unprivileged_with_the_owner_credential() -> None:
    unit = settings()
    assert unit["User"] == ["aios-agent-task"]
    assert unit["Group"] == ["aios-agent-task"]
    assert unit["Type"] == ["oneshot"]
    assert unit["LoadCredential"][0].startswith("agent_task_control_token:")
    assert "AIOS_GOVERNED_WRITE_API_URL=http://127.0.0.1:18892" in unit["Environment"]
    assert unit["RestrictAddressFamilies"] == ["AF_UNIX AF_INET"]
    assert unit["ReadWritePaths"] == ["/var/lib/aios-agent-task"]
    assert "aios-ledger project" in unit["ExecStart"][0]
    assert not re.search(r"^User=root", UNIT.read_text(), re.MULTILINE)


def test_worker_unit_runs_one_agent_from_its_config_file_as_an_unprivileged_user() -> None:
    unit = settings(WORKER_UNIT)
    assert unit["User"] == ["aios-ledger"] and unit["Group"] == ["aios-ledger"]
    (command,) = unit["ExecStart"]
    assert re.fullmatch(
        r"/usr/bin/env aios-ledger --config /etc/aios-ledger/worker-%i\.toml .*worker", command
    )
    assert unit["ConditionPathExists"] == ["/etc/aios-ledger/worker-%i.toml"]
    assert unit["EnvironmentFile"] == ["-/etc/aios-ledger/worker-%i.env"]
    # The agent's workspace and the ledger's directory are its own, and nothing else is writable.
    (state,) = unit["StateDirectory"]
    assert state.split() == ["aios-ledger", "aios-ledger/workspaces/%i"]
    assert unit["StateDirectoryMode"] == ["0700"]
    assert unit["WorkingDirectory"] == ["/var/lib/aios-ledger/workspaces/%i"]
    assert "ReadWritePaths" not in unit
    assert unit["WantedBy"] == ["multi-user.target"]


def test_worker_unit_restarts_a_failed_worker_but_not_a_usage_mistake() -> None:
    unit = settings(WORKER_UNIT)
    assert unit["Restart"] == ["on-failure"]
    assert unit["RestartSec"] == ["5s"]
    assert unit["RestartPreventExitStatus"] == ["2"]
    assert unit["StartLimitBurst"] == ["5"]


def test_worker_unit_stops_the_worker_first_so_that_it_releases_its_tasks() -> None:
    """KillMode=mixed: SIGTERM reaches the worker alone (as the worker's SIGTERM tests send it),
    which kills its commands after the grace period and releases their tasks; only after
    TimeoutStopSec does systemd SIGKILL what is left. So the timeout must outlast the default
    grace, the kill's two waits and the release."""
    unit = settings(WORKER_UNIT)
    assert unit["KillMode"] == ["mixed"]
    assert unit["KillSignal"] == ["SIGTERM"]
    (timeout,) = unit["TimeoutStopSec"]
    assert timeout.endswith("s")
    assert float(timeout[:-1]) >= WorkerSettings().grace + 2 * KILL_WAIT_SECONDS + 5


def test_api_unit_serves_the_projections_ledger_on_loopback_only() -> None:
    unit, projection = settings(API_UNIT), settings(UNIT)
    assert unit["User"] == projection["User"] == ["aios-agent-task"]
    assert unit["Group"] == projection["Group"]
    (command,) = unit["ExecStart"]
    assert re.fullmatch(r"/usr/bin/env aios-ledger .*serve --listen 127\.0\.0\.1:18892", command)
    # The address the projection unit's HTTP resolver uses, and the ledger it projects into.
    assert "AIOS_GOVERNED_WRITE_API_URL=http://127.0.0.1:18892" in projection["Environment"]
    database = [e for e in unit["Environment"] if e.startswith("AIOS_LEDGER_DB=")]
    assert database == [e for e in projection["Environment"] if e.startswith("AIOS_LEDGER_DB=")]
    assert unit["ReadWritePaths"] == projection["ReadWritePaths"]
    # The network it needs and nothing more.
    assert unit["RestrictAddressFamilies"] == ["AF_UNIX AF_INET"]
    assert unit["IPAddressDeny"] == ["any"] and unit["IPAddressAllow"] == ["localhost"]
    assert unit["SocketBindAllow"] == ["tcp:18892"] and unit["SocketBindDeny"] == ["any"]
    assert unit["MemoryDenyWriteExecute"] == ["yes"]
    assert unit["Restart"] == ["on-failure"] and unit["RestartPreventExitStatus"] == ["2"]


@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_unit_is_hardened(unit: Path) -> None:
    found = settings(unit)
    expected = {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "PrivateTmp": "yes",
        "ProtectHome": "yes",
        "CapabilityBoundingSet": "",
        "UMask": "0077",
    }
    for key, value in expected.items():
        assert found[key] == [value], key
    assert "@system-service" in found["SystemCallFilter"]
    assert not re.search(r"^User=root", unit.read_text(), re.MULTILINE)


@needs_systemd
@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_systemd_verify_has_no_warnings(unit: Path, tmp_path: Path) -> None:
    checked = analysable(unit, tmp_path)
    answer = subprocess.run(
        ["systemd-analyze", "verify", str(checked)], capture_output=True, text=True
    )
    assert answer.returncode == 0, answer.stderr
    own = [line for line in answer.stderr.splitlines() if checked.name in line]
    assert own == []


@needs_systemd
@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_systemd_security_exposure_is_at_most_two(unit: Path, tmp_path: Path) -> None:
    checked = analysable(unit, tmp_path)
    answer = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", str(checked)],
        capture_output=True,
        text=True,
    )
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", answer.stdout + answer.stderr)
    assert match is not None, answer.stdout + answer.stderr
    assert float(match.group(1)) <= 2.0
