"""API tokens: the pure decisions (golden plans), the store, the `token` commands, and `verify`
holding token rows against their seals. A token never reaches an event, only its name and
roles; the ledger keeps only the token's sha256."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from aios_ledger.core import ChainTip, LedgerError, LogTail, Timestamp, WritePlan
from aios_ledger.core.actors import Actor
from aios_ledger.core.api.tokens import (
    ApiTokenRow,
    TokenIssueRequest,
    TokenRevokeRequest,
    TokenState,
    decide_issue_token,
    decide_revoke_token,
    token_sha256,
)
from aios_ledger.core.kinds import Sha256Hex
from aios_ledger.core.log import LEDGER_CHAIN
from aios_ledger.core.log.plan import Replay
from aios_ledger.shell import Database, main, verify_log
from aios_ledger.shell.api.tokens import authenticate, issue_token, list_tokens, revoke_token
from conftest import both_engines
from legacy_fixtures import rows
from syrupy.assertion import SnapshotAssertion
from test_log_support import tamper

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

NOW = Timestamp.parse("2026-11-30T12:00:00Z")
LATER = Timestamp.parse("2026-11-30T13:00:00Z")
DIGEST = Sha256Hex("a" * 64)
# The store and command tests run on SQLite and on PostgreSQL (`ledger_target`).
pytest_generate_tests = both_engines
TAIL = LogTail.read(5, [LEDGER_CHAIN], [ChainTip(LEDGER_CHAIN, 4, "sha256:" + "4" * 64)])


def plan_view(plan: Any) -> dict[str, Any]:
    assert isinstance(plan, WritePlan)
    return {
        "writes": [attrs.asdict(write) for write in plan.writes],
        "events": [attrs.asdict(event) for event in plan.events],
        "response": plan.response,
    }


def active_row(**changes: Any) -> ApiTokenRow:
    row = ApiTokenRow("agent-7", '["agent"]', DIGEST, "ACTIVE", 1, NOW.text, NOW.text)
    return attrs.evolve(row, **changes)


def test_issuing_a_token_is_golden(golden: SnapshotAssertion) -> None:
    request = TokenIssueRequest.from_mapping({"name": "agent-7", "roles": ["reviewer", "agent"]})
    plan = decide_issue_token(TokenState(None, TAIL), request, now=NOW, digest=DIGEST, actor=ACTOR)
    view = plan_view(plan)
    assert view["events"][0]["event"]["event_type"] == "API_TOKEN_ISSUED"
    # Name and roles only: the digest is in the row (covered by the seal), never in the event.
    assert DIGEST not in json.dumps(view["events"])
    assert golden == view


def test_reissuing_a_revoked_name_and_revoking_are_golden(golden: SnapshotAssertion) -> None:
    revoked = active_row(status="REVOKED", revision=2)
    request = TokenIssueRequest.from_mapping({"name": "agent-7", "roles": ["owner"]})
    again = decide_issue_token(
        TokenState(revoked, TAIL), request, now=LATER, digest=Sha256Hex("b" * 64), actor=ACTOR
    )
    revoke = decide_revoke_token(
        TokenState(active_row(), TAIL),
        TokenRevokeRequest.from_mapping({"name": "agent-7"}),
        now=LATER,
        actor=ACTOR,
    )
    assert golden == {"reissue": plan_view(again), "revoke": plan_view(revoke)}


def test_token_decisions_refuse() -> None:
    request = TokenIssueRequest.from_mapping({"name": "agent-7", "roles": ["agent"]})
    with pytest.raises(LedgerError, match="TOKEN_NAME_TAKEN"):
        decide_issue_token(
            TokenState(active_row(), TAIL), request, now=NOW, digest=DIGEST, actor=ACTOR
        )
    revoke = TokenRevokeRequest.from_mapping({"name": "agent-7"})
    with pytest.raises(LedgerError, match="TOKEN_NOT_FOUND"):
        decide_revoke_token(TokenState(None, TAIL), revoke, now=NOW, actor=ACTOR)
    replay = decide_revoke_token(
        TokenState(active_row(status="REVOKED"), TAIL), revoke, now=NOW, actor=ACTOR
    )
    assert isinstance(replay, Replay) and replay.response["idempotent"] is True


@pytest.mark.parametrize(
    "raw",
    [
        {"name": "a", "roles": []},
        {"name": "a", "roles": ["agent", "agent"]},
        {"name": "a", "roles": ["root"]},
        {"name": "", "roles": ["agent"]},
        {"name": "a b", "roles": ["agent"]},
        {"name": "a", "roles": "agent"},
        {"name": "a", "roles": ["agent"], "token": "x"},
        ["a", ["agent"]],
    ],
)
def test_bad_issue_requests_are_fields_invalid(raw: object) -> None:
    with pytest.raises(LedgerError, match="FIELDS_INVALID"):
        TokenIssueRequest.from_mapping(raw)


def test_the_store_keeps_only_the_digest_and_revocation_takes_effect(ledger_target: Path) -> None:
    path = ledger_target
    with Database(path) as db:
        issued = issue_token(db, "agent-1", ["agent"])
        token = issued["token"]
        assert len(token) >= 43
        principal = authenticate(db, token)
        assert principal is not None and principal.name == "agent-1"
        assert principal.roles == frozenset({"agent"})
        assert authenticate(db, token + "x") is None
        assert authenticate(db, "") is None
        revoke_token(db, "agent-1")
        assert authenticate(db, token) is None
        # A revoked name is issued again with a new secret; the old one stays refused.
        fresh = issue_token(db, "agent-1", ["agent", "reviewer"])["token"]
        assert fresh != token and authenticate(db, token) is None
        assert authenticate(db, fresh) is not None
        assert [t["status"] for t in list_tokens(db)] == ["ACTIVE"]
        assert verify_log(db).intact
    assert rows(path, "SELECT token_sha256 FROM api_tokens") == [(token_sha256(fresh),)]
    everything = json.dumps(rows(path, "SELECT * FROM events"))
    for secret in (token, fresh, token_sha256(token), token_sha256(fresh)):
        assert secret not in everything


def test_a_token_row_changed_behind_the_ledger_is_found_by_verify(ledger_target: Path) -> None:
    path = ledger_target
    with Database(path) as db:
        issue_token(db, "auditor-1", ["auditor"])
    tamper(path, ("""UPDATE api_tokens SET roles_json = '["owner"]'""", ()))
    with Database(path) as db:
        report = verify_log(db)
    assert not report.intact
    assert {(f.code, f.table, f.key) for f in report.findings} == {
        ("STATE_MISMATCH", "api_tokens", "auditor-1")
    }


def test_token_commands(ledger_target: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(ledger_target)
    assert main(["--db", db, "init"]) == 0
    capsys.readouterr()
    assert main(["--db", db, "token", "issue", "ops", "--role", "owner", "--role", "auditor"]) == 0
    issued = json.loads(capsys.readouterr().out)
    assert issued["roles"] == ["owner", "auditor"] and issued["token"]
    assert main(["--db", db, "token", "issue", "ops", "--role", "owner"]) != 0
    assert "TOKEN_NAME_TAKEN" in capsys.readouterr().err
    assert main(["--db", db, "token", "list"]) == 0
    listed = capsys.readouterr().out
    assert "ops" in listed and issued["token"] not in listed and "sha256" not in listed
    assert main(["--db", db, "token", "revoke", "ops"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "REVOKED"
    assert main(["--db", db, "token", "revoke", "nobody"]) != 0
    assert "TOKEN_NOT_FOUND" in capsys.readouterr().err
    assert main(["--db", db, "token", "issue", "x", "--role", "root"]) == 2
