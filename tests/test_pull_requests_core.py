"""The pull request after a governed write, purely (`core.git.pull_requests`, `core.git.forges`):
golden plans of the opened and the failed request, the sealed request answering itself, what is
refused, and the request's title and body (no forge, no database)."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from aios_ledger.core import LedgerError, LogTail, Timestamp, WritePlan, chain_of
from aios_ledger.core.actors import Actor
from aios_ledger.core.git import GovernedWriteRow
from aios_ledger.core.git.forges import PullRequestSetting, pull_request_text, route_pull_request
from aios_ledger.core.git.pull_requests import (
    ForgeAnswer,
    PullRequestState,
    decide_pull_request,
    recorded_pull_request,
)
from aios_ledger.core.log.plan import Replay
from aios_ledger.core.log.seals import ChainTip
from syrupy.assertion import SnapshotAssertion

ACTOR = Actor("owner-1", "library")
NOW = Timestamp.parse("2026-12-06T10:00:00.000Z")
TASK = "task-a"


def write(state: str = "APPLIED") -> GovernedWriteRow:
    return GovernedWriteRow(
        idempotency_key="write-a",
        task_id=TASK,
        proposal_id=f"{TASK}#1",
        repository="acme/widgets",
        ref="refs/heads/agent/task-a",
        old_oid="0" * 40,
        new_oid="b" * 40,
        generation=1,
        state=state,
        code=None,
        observed_oid="b" * 40,
        changed_files_json='["src/widget.py"]',
        revision=2,
        created_at="2026-12-06T09:59:00.000Z",
        updated_at="2026-12-06T09:59:01.000Z",
    )


def tail() -> LogTail:
    chain = chain_of(TASK)
    return LogTail.read(40, [chain], [ChainTip(chain, 9, "sha256:" + "c" * 64)])


def answer(**fields: Any) -> ForgeAnswer:
    common = {
        "idempotency_key": "write-a",
        "forge": "github",
        "project": "acme/widgets",
        "head": "agent/task-a",
        "base": "main",
    }
    return ForgeAnswer.from_mapping({**common, **fields})


OPENED = {"url": "https://github.com/acme/widgets/pull/12", "number": 12}
FAILED = {"code": "PULL_REQUEST_REFUSED", "status": 422, "message": "HTTP 422: Validation Failed"}


def plan_view(plan: Any) -> dict[str, Any]:
    assert isinstance(plan, WritePlan)
    return {
        "writes": [attrs.asdict(w) for w in plan.writes],
        "events": [attrs.asdict(e) for e in plan.events],
        "response": plan.response,
    }


@pytest.mark.parametrize("outcome", ["opened", "failed"])
def test_what_the_forge_answered_is_sealed_golden(outcome: str, golden: SnapshotAssertion) -> None:
    given = answer(**(OPENED if outcome == "opened" else FAILED))
    plan = decide_pull_request(PullRequestState(write(), None, tail()), given, now=NOW, actor=ACTOR)
    assert golden == plan_view(plan)
    assert isinstance(plan, WritePlan) and plan.writes == ()
    [event] = plan.events
    assert event.event.task_id == TASK and event.event.actor is not None
    assert ACTOR.name in event.event.actor


def test_a_sealed_request_answers_itself_and_a_failure_does_not() -> None:
    state = PullRequestState(write(), None, tail())
    opened = decide_pull_request(state, answer(**OPENED), now=NOW, actor=ACTOR)
    assert isinstance(opened, WritePlan)
    events = [
        {"event_type": e.event.event_type, "payload": json.loads(e.event.payload_json)}
        for e in opened.events
    ]
    recorded = recorded_pull_request(events, "write-a")
    assert recorded is not None and recorded["state"] == "OPENED"
    again = decide_pull_request(
        PullRequestState(write(), recorded, tail()), answer(**OPENED), now=NOW, actor=ACTOR
    )
    assert isinstance(again, Replay) and again.response["idempotent"] is True
    failed = {**recorded, "state": "FAILED"}
    retried = decide_pull_request(
        PullRequestState(write(), failed, tail()), answer(**OPENED), now=NOW, actor=ACTOR
    )
    assert isinstance(retried, WritePlan)
    assert recorded_pull_request(events, "another-write") is None


@pytest.mark.parametrize(
    ("row", "code"),
    [(None, "WRITE_NOT_FOUND"), (write("NOT_APPLIED"), "WRITE_NOT_APPLIED")],
)
def test_only_a_landed_write_is_proposed(row: GovernedWriteRow | None, code: str) -> None:
    with pytest.raises(LedgerError) as refused:
        decide_pull_request(
            PullRequestState(row, None, tail()), answer(**OPENED), now=NOW, actor=ACTOR
        )
    assert refused.value.code == code


@pytest.mark.parametrize(
    "fields",
    [
        {},  # neither a request nor a failure
        {**OPENED, **FAILED},  # both
        {"url": OPENED["url"]},  # a request without its number
        {**FAILED, "code": "SOMETHING_ELSE"},
        {**OPENED, "number": 0},
    ],
)
def test_a_forge_answer_is_a_request_or_a_failure(fields: dict[str, Any]) -> None:
    with pytest.raises(LedgerError):
        answer(**fields)


def test_the_title_is_the_goals_first_line_and_the_body_names_who_did_what() -> None:
    text = pull_request_text(
        goal="Fix the widget\n\nlong explanation",
        task_id=TASK,
        attempt=2,
        agent="agent-7",
        reviewer=None,
        verdict="SUCCEEDED",
        attestation_sha256="d" * 64,
        idempotency_key="write-a",
    )
    assert text.title == "Fix the widget"
    assert "- agent: agent-7" in text.body
    assert "- reviewer: not named in the verdict" in text.body
    assert f"- attestation: sha256:{'d' * 64}" in text.body
    assert "attempt 2" in text.body
    long = pull_request_text(
        goal="x" * 500,
        task_id=TASK,
        attempt=1,
        agent=None,
        reviewer=None,
        verdict=None,
        attestation_sha256=None,
        idempotency_key="k",
    )
    assert len(long.title) == 200 and "- attestation: none" in long.body


def test_the_route_names_the_base_and_the_token_file_or_why_no_forge_is_asked() -> None:
    setting = PullRequestSetting.from_mapping(
        {"forge": "github", "api_url": "https://api.github.com", "project": "acme/widgets"}
    )
    remote = {"remote_scheme": "https", "remote_token_file": "/run/token"}
    route = route_pull_request(setting, head_branch="main", **remote)
    assert (route.base, route.token_file, route.refusal) == ("main", "/run/token", None)
    own = PullRequestSetting.from_mapping(
        {**setting.public(), "base_branch": "develop", "token_file": "/run/forge-token"}
    )
    route = route_pull_request(own, head_branch="main", **remote)
    assert (route.base, route.token_file) == ("develop", "/run/forge-token")
    no_base = route_pull_request(setting, head_branch=None, **remote).refusal
    assert no_base is not None and no_base[0] == "PULL_REQUEST_REFUSED"
    ssh = route_pull_request(
        setting, head_branch="main", remote_scheme="ssh", remote_token_file=None
    ).refusal
    assert ssh is not None and ssh[0] == "PULL_REQUEST_AUTH_REFUSED"
    assert (
        "PULL_REQUEST_SETTING_INVALID: pull_request: this repository has no HTTPS token" in ssh[1]
    )
    unread = route_pull_request(setting, head_branch="main", **remote, remote_unreadable="bad")
    assert unread.refusal == ("PULL_REQUEST_AUTH_REFUSED", "bad")
