"""A repository's settings and an agent's scan budget, purely (`core.git.settings`, the settings
decision): golden plans, the replay before any compare-and-swap, the agent's window as a table
of spends, and what a cut budget refuses with (no git, no database)."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from aios_ledger.core import LedgerError, LogTail, RetryLaterError, Timestamp, WritePlan
from aios_ledger.core.actors import Actor
from aios_ledger.core.git import (
    AgentScanSpend,
    RepositoryRow,
    RepositorySettings,
    RepositorySettingsChangeRow,
    RepositorySettingsRequest,
    RepositorySettingsState,
    SettingsChange,
    admit_scan,
    decide_change_repository_settings,
)
from aios_ledger.core.git.secrets import ScanBudget
from aios_ledger.core.git.settings import DEFAULT_SETTINGS, scan_window_start
from aios_ledger.core.log.plan import Replay
from aios_ledger.core.log.seals import LEDGER_CHAIN, ChainTip
from syrupy.assertion import SnapshotAssertion

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

NOW = Timestamp.parse("2026-12-01T10:00:00.000Z")
REPO = "acme/widgets"
WORDLIST = "detect_secrets.filters.wordlist.should_exclude_secret"
BASELINE = json.dumps({"results": {"a.py": [{"type": "AWS Access Key", "hashed_secret": "f"}]}})


def repository(revision: int = 1, **settings: Any) -> RepositoryRow:
    row = RepositoryRow(
        name=REPO,
        path="/srv/git/widgets.git",
        head_branch="main",
        protected_json='["main","master","release/*"]',
        revision=revision,
        created_at="2026-12-01T08:00:00.000Z",
        updated_at="2026-12-01T08:00:00.000Z",
    )
    return row.with_settings(attrs.evolve(DEFAULT_SETTINGS, **settings))


def tail() -> LogTail:
    return LogTail.read(12, [LEDGER_CHAIN], [ChainTip(LEDGER_CHAIN, 11, "sha256:" + "a" * 64)])


def request(**settings: Any) -> RepositorySettingsRequest:
    return RepositorySettingsRequest.from_mapping(
        {"name": REPO, "idempotency_key": "raise-budget", "settings": settings}
    )


def plan_view(plan: Any) -> dict[str, Any]:
    assert isinstance(plan, WritePlan)
    return {
        "writes": [attrs.asdict(write) for write in plan.writes],
        "events": [attrs.asdict(event) for event in plan.events],
        "response": plan.response,
    }


def test_changing_settings_is_golden(golden: SnapshotAssertion) -> None:
    changed = request(secrets_baseline=BASELINE, scan_max_bytes=1 << 20, agent_scan_max_seconds=60)
    plan = decide_change_repository_settings(
        RepositorySettingsState(repository(), None, tail()), changed, now=NOW, actor=ACTOR
    )
    assert golden == plan_view(plan)
    assert isinstance(plan, WritePlan)
    assert plan.response["changed"] == [
        "secrets_baseline_sha256",
        "scan_max_bytes",
        "agent_scan_max_seconds",
    ]


def test_a_key_used_before_replays_before_any_compare_and_swap() -> None:
    first = decide_change_repository_settings(
        RepositorySettingsState(repository(), None, tail()),
        request(scan_max_bytes=5),
        now=NOW,
        actor=ACTOR,
    )
    assert isinstance(first, WritePlan)
    stored = RepositorySettingsChangeRow(**first.writes[1].params)  # type: ignore[arg-type]
    # The repository moved on since (another change): the same key and request still replay.
    moved = RepositorySettingsState(repository(revision=7), stored, tail())
    again = decide_change_repository_settings(
        moved, request(scan_max_bytes=5), now=NOW, actor=ACTOR
    )
    assert isinstance(again, Replay)
    assert again.response == {**first.response, "idempotent": True}
    with pytest.raises(LedgerError) as conflict:
        decide_change_repository_settings(moved, request(scan_max_bytes=6), now=NOW, actor=ACTOR)
    assert conflict.value.code == "IDEMPOTENCY_CONFLICT"


def test_an_expected_revision_the_repository_is_not_at_is_a_conflict() -> None:
    stale = RepositorySettingsRequest.from_mapping(
        {
            "name": REPO,
            "idempotency_key": "k",
            "settings": {"scan_max_bytes": 5},
            "expected_revision": 1,
        }
    )
    with pytest.raises(LedgerError) as conflict:
        decide_change_repository_settings(
            RepositorySettingsState(repository(revision=2), None, tail()),
            stale,
            now=NOW,
            actor=ACTOR,
        )
    assert conflict.value.code == "REVISION_CONFLICT"
    with pytest.raises(LedgerError) as missing:
        decide_change_repository_settings(
            RepositorySettingsState(None, None, tail()), stale, now=NOW, actor=ACTOR
        )
    assert missing.value.code == "REPOSITORY_NOT_FOUND"


def test_a_change_sets_what_it_gives_and_keeps_the_rest() -> None:
    current = attrs.evolve(DEFAULT_SETTINGS, scan_max_bytes=10, allow_gitlinks=True)
    with_baseline = SettingsChange.from_mapping({"secrets_baseline": BASELINE}).apply(current)
    assert with_baseline.scan_max_bytes == 10 and with_baseline.allow_gitlinks is True
    assert with_baseline.secrets_baseline_json == BASELINE
    assert with_baseline.baseline() == json.loads(BASELINE)
    cleared = SettingsChange.from_mapping({"clear_secrets_baseline": True}).apply(with_baseline)
    assert (cleared.secrets_baseline_json, cleared.secrets_baseline_sha256) == (None, None)
    assert (
        SettingsChange.from_mapping({"scan_max_seconds": 3}).apply(current).scan_max_seconds == 3.0
    )


@pytest.mark.parametrize(
    "settings",
    [
        {"scan_max_bytes": 0},
        {"scan_max_bytes": True},
        {"scan_max_seconds": 0},
        {"scan_max_seconds": "20"},
        {"agent_scan_max_bytes": -1},
        {"agent_scan_window_seconds": 30},
        {"allow_gitlinks": 1},
        {"unknown": 1},
        {"secrets_baseline": BASELINE, "clear_secrets_baseline": True},
        {"secrets_baseline": "[]"},
        {"secrets_baseline": json.dumps({"results": {}, "filters_used": [{"path": WORDLIST}]})},
    ],
)
def test_bad_settings_are_refused_naming_them(settings: dict[str, Any]) -> None:
    with pytest.raises(LedgerError) as refused:
        SettingsChange.from_mapping(settings)
    assert refused.value.code == "REPOSITORY_SETTING_INVALID"


# ---------------------------------------------------------------------------------------------
# the agent's window

SETTINGS = RepositorySettings(
    scan_max_bytes=1000,
    scan_max_seconds=20.0,
    agent_scan_max_bytes=5000,
    agent_scan_max_seconds=60.0,
    agent_scan_window_seconds=3600,
)


def test_the_window_starts_its_length_before_now() -> None:
    assert scan_window_start(SETTINGS, now=NOW).text == "2026-12-01T09:00:00.000Z"


@pytest.mark.parametrize(
    ("spend", "budget"),
    [
        # Nothing spent: the repository's per-proposal budget, uncut.
        (AgentScanSpend(), (1000, 20.0, None, None)),
        # Less left than a proposal's budget: cut to what is left, and said so.
        (AgentScanSpend(3, 4500, 1.0, "2026-12-01T09:30:00.000Z"), (500, 20.0, 500, None)),
        (AgentScanSpend(3, 10, 50.0, "2026-12-01T09:30:00.000Z"), (1000, 10.0, None, 10.0)),
    ],
)
def test_an_agent_with_budget_left_is_admitted_under_what_is_left(
    spend: AgentScanSpend, budget: tuple[int, float, int | None, float | None]
) -> None:
    admitted = admit_scan(SETTINGS, spend, agent_id="agent-7", now=NOW)
    found = (admitted.max_bytes, admitted.max_seconds, admitted.agent_bytes, admitted.agent_seconds)
    assert found == budget


@pytest.mark.parametrize(
    ("spend", "retry_after"),
    [
        (AgentScanSpend(5, 5000, 1.0, "2026-12-01T09:30:00.000Z"), 1800),
        (AgentScanSpend(9, 100, 60.0, "2026-12-01T09:00:00.001Z"), 1),
        (AgentScanSpend(9, 9000, 61.5, "2026-12-01T09:59:59.500Z"), 3600),
    ],
)
def test_an_agent_whose_window_is_spent_is_refused_until_its_oldest_proposal_leaves_it(
    spend: AgentScanSpend, retry_after: int
) -> None:
    with pytest.raises(RetryLaterError) as refused:
        admit_scan(SETTINGS, spend, agent_id="agent-7", now=NOW)
    assert refused.value.code == "AGENT_SCAN_BUDGET_EXCEEDED"
    assert refused.value.retry_after == retry_after
    assert "agent-7" in refused.value.detail


def test_a_scan_past_a_cut_budget_is_the_agents_refusal_and_past_the_repositorys_is_not() -> None:
    cut = admit_scan(
        SETTINGS,
        AgentScanSpend(1, 4500, 59.0, "2026-12-01T09:30:00.000Z"),
        agent_id="agent-7",
        now=NOW,
    )
    overruns: list[Callable[[], None]] = [
        lambda: cut.require_bytes(501),
        lambda: cut.require_seconds(1.5),
    ]
    for over in overruns:
        with pytest.raises(RetryLaterError) as refused:
            over()
        assert (refused.value.code, refused.value.retry_after) == (
            "AGENT_SCAN_BUDGET_EXCEEDED",
            1800,
        )
    uncut = admit_scan(SETTINGS, AgentScanSpend(), agent_id="agent-7", now=NOW)
    with pytest.raises(LedgerError) as refused_whole:
        uncut.require_bytes(1001)
    assert refused_whole.value.code == "SCAN_BUDGET_EXCEEDED"
    assert not isinstance(refused_whole.value, RetryLaterError)
    assert ScanBudget().agent_bytes is None


def test_a_retry_later_refusal_survives_pickling() -> None:
    error = RetryLaterError("AGENT_SCAN_BUDGET_EXCEEDED", "later", retry_after=42)
    copied = pickle.loads(pickle.dumps(error))
    assert (copied.code, copied.detail, copied.retry_after) == (error.code, "later", 42)
