"""The projection's systemd unit: unprivileged, owner-credential bound, hardened, and valid."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UNIT = ROOT / "deploy/systemd/aios-agent-task-initial-execution-projection.service"
HAS_SYSTEMD = shutil.which("systemd-analyze") is not None


def settings() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, value = line.split("=", 1)
            found.setdefault(key.strip(), []).append(value.strip())
    return found


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


def test_unit_is_hardened() -> None:
    unit = settings()
    expected = {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "PrivateTmp": "yes",
        "ProtectHome": "yes",
        "CapabilityBoundingSet": "",
        "UMask": "0077",
    }
    for key, value in expected.items():
        assert unit[key] == [value], key
    assert "@system-service" in unit["SystemCallFilter"]


@pytest.mark.skipif(not HAS_SYSTEMD, reason="systemd-analyze is not installed")
def test_systemd_verify_has_no_warnings() -> None:
    answer = subprocess.run(
        ["systemd-analyze", "verify", str(UNIT)], capture_output=True, text=True
    )
    assert answer.returncode == 0, answer.stderr
    own = [line for line in answer.stderr.splitlines() if UNIT.name in line]
    assert own == []


@pytest.mark.skipif(not HAS_SYSTEMD, reason="systemd-analyze is not installed")
def test_systemd_security_exposure_is_at_most_two() -> None:
    answer = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", str(UNIT)],
        capture_output=True,
        text=True,
    )
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", answer.stdout + answer.stderr)
    assert match is not None, answer.stdout + answer.stderr
    assert float(match.group(1)) <= 2.0
