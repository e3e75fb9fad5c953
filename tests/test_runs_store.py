"""`RunStore` and `RunEvidenceReader`: runs, append-only events, bounded evidence snapshots."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
import attrs
import pytest
from aios_ledger.core import (
    LedgerError,
    LogTail,
    Timestamp,
    WritePlan,
    canonical_json,
    digest_bytes,
)
from aios_ledger.core.actors import Actor
from aios_ledger.core.log import LEDGER_CHAIN
from aios_ledger.core.runs import (
    EvidenceReadRequest,
    ExecutionTarget,
    RunCreateState,
    RunRow,
    RunState,
    decide_append_run_event,
    decide_create_run,
)
from aios_ledger.core.runs.evidence import (
    MAX_EVENTS_PAGE,
    RunCreateRequest,
    RunEventAppendRequest,
)
from aios_ledger.shell.runs.store import RunEvidenceReader, RunStore
from conftest import both_engines, fresh_target
from engine_support import sqlite_database
from hypothesis import given, settings
from hypothesis import strategies as st
from syrupy.assertion import SnapshotAssertion

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

EXAMPLES = 200 if os.environ.get("AIOS_SOAK") == "1" else 30
FIXED = datetime(2026, 8, 20, tzinfo=UTC)


def fixed_clock() -> datetime:
    return FIXED


pytest_generate_tests = both_engines
pytestmark = pytest.mark.usefixtures("engine_targets")


def store(path: Path | None = None) -> RunStore:
    """A fresh store: in memory, or in a fresh PostgreSQL schema."""
    return RunStore(path if path is not None else fresh_target(), clock=fixed_clock)


def sqlite_only(reason: str) -> None:
    if fresh_target() is not None:
        pytest.skip(reason)


def request(session: str = "s-1", run: str = "r-1", **limits: int) -> EvidenceReadRequest:
    return EvidenceReadRequest(ExecutionTarget(session, run), **limits)


def test_create_append_and_read() -> None:
    runs = store()
    run = runs.create_run("s-1", "review the change", run_id="r-1")
    assert (run.run_id, run.session_id, run.event_count) == ("r-1", "s-1", 0)
    first = runs.append_event("r-1", "tool_call", {"tool": "grep"})
    second = runs.append_event("r-1", "note", "plain text")
    assert (first.seq, second.seq) == (1, 2)
    assert runs.get_run("r-1").event_count == 2
    assert [event.payload() for event in runs.run_events("r-1")] == [{"tool": "grep"}, "plain text"]
    generated = runs.create_run("s-1", "another")
    assert generated.run_id.startswith("run-")


def test_create_is_idempotent_by_run_id() -> None:
    runs = store()
    first = runs.create_run("s-1", "prompt", run_id="r-1")
    assert runs.create_run("s-1", "prompt", run_id="r-1") == first
    with pytest.raises(LedgerError, match="RUN_CONFLICT"):
        runs.create_run("s-1", "other prompt", run_id="r-1")
    with pytest.raises(LedgerError, match="RUN_CONFLICT"):
        runs.create_run("s-2", "prompt", run_id="r-1")
    events = runs.database.write_schema(
        lambda conn: list(conn.execute("SELECT event_type, task_id FROM events"))
    )
    assert events == [("RUN_CREATED", None)]


@pytest.mark.parametrize(
    ("session", "prompt", "run_id"),
    [("", "p", "r"), ("s", "", "r"), ("s", "p", "bad id"), (7, "p", "r"), ("s", None, "r")],
)
def test_bad_runs_are_refused_and_change_nothing(session: Any, prompt: Any, run_id: Any) -> None:
    runs = store()
    with pytest.raises(LedgerError, match="FIELDS_INVALID"):
        runs.create_run(session, prompt, run_id=run_id)
    assert runs.database.write_schema(lambda conn: list(conn.execute("SELECT * FROM runs"))) == []


def test_bad_events_are_refused_and_change_nothing() -> None:
    runs = store()
    runs.create_run("s-1", "p", run_id="r-1")
    with pytest.raises(LedgerError, match="RUN_NOT_FOUND"):
        runs.append_event("r-missing", "note", {})
    with pytest.raises(LedgerError, match="FIELDS_INVALID"):
        runs.append_event("r-1", "bad kind", {})
    with pytest.raises(LedgerError, match="JSON_INVALID"):
        runs.append_event("r-1", "note", {"x": float("nan")})
    with pytest.raises(LedgerError, match="JSON_INVALID"):
        runs.append_event("r-1", "note", {"x": object()})
    with pytest.raises(LedgerError, match="RUN_NOT_FOUND"):
        runs.get_run("r-missing")
    assert runs.get_run("r-1").event_count == 0
    assert runs.run_events("r-1") == ()


@pytest.mark.parametrize("limit", [0, -1, MAX_EVENTS_PAGE + 1, True, 2.0, "3"])
def test_a_page_limit_out_of_range_is_refused_not_clamped(limit: Any) -> None:
    runs = store()
    runs.create_run("s-1", "p", run_id="r-1")
    runs.append_event("r-1", "note", 1)
    with pytest.raises(LedgerError) as refused:
        runs.run_events("r-1", limit=limit)
    assert refused.value.code == "FIELDS_INVALID"
    assert refused.value.detail.startswith("arguments.limit: ")
    assert len(runs.run_events("r-1", limit=MAX_EVENTS_PAGE)) == 1


def test_run_events_are_append_only() -> None:
    sqlite_only("the append-only triggers on PostgreSQL: test_postgres_engine.py")
    runs = store()
    runs.create_run("s-1", "p", run_id="r-1")
    runs.append_event("r-1", "note", 1)
    for statement in ("UPDATE run_events SET kind = 'x'", "DELETE FROM run_events"):
        with pytest.raises(apsw.ConstraintError, match="EVENTS_APPEND_ONLY"):
            sqlite_database(runs.database).conn.execute(statement)


def test_evidence_of_unknown_or_foreign_runs_is_refused() -> None:
    runs = store()
    runs.create_run("s-1", "p", run_id="r-1")
    reader = RunEvidenceReader(runs)
    with pytest.raises(LedgerError, match="RUN_NOT_FOUND"):
        reader.read(request(run="r-missing"))
    with pytest.raises(LedgerError, match="TARGET_MISMATCH"):
        reader.read(request(session="s-other"))
    with pytest.raises(LedgerError, match="FIELDS_INVALID"):
        reader.read(request(max_events=0))
    with pytest.raises(LedgerError, match="FIELDS_INVALID"):
        reader.read(EvidenceReadRequest(ExecutionTarget("bad session", "r-1")))
    with pytest.raises(LedgerError, match="FIELDS_INVALID"):
        reader.read("not a request")  # type: ignore[arg-type]


def test_evidence_is_truncated_by_events_and_by_bytes() -> None:
    runs = store()
    runs.create_run("s-1", "p", run_id="r-1")
    for index in range(5):
        runs.append_event("r-1", "note", {"index": index, "text": "x" * 50})
    reader = RunEvidenceReader(runs)
    whole = reader.read(request())
    assert (len(whole.events), whole.truncated) == (5, False)
    by_count = reader.read(request(max_events=3))
    assert ([e.seq for e in by_count.events], by_count.truncated) == ([1, 2, 3], True)
    exact = reader.read(request(max_events=5))
    assert exact.truncated is False
    one_size = len(canonical_json(whole.events[0].public()).encode())
    by_bytes = reader.read(request(max_bytes=2 * one_size + 1))
    assert ([e.seq for e in by_bytes.events], by_bytes.truncated) == ([1, 2], True)
    nothing = reader.read(request(max_bytes=1))
    assert (nothing.events, nothing.truncated) == ((), True)
    assert len({s.snapshot_digest for s in (whole, by_count, by_bytes, nothing)}) == 4


def test_evidence_digest_is_reproducible_on_re_read(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with store(path) as runs:
        runs.create_run("s-1", "p", run_id="r-1")
        for index in range(4):
            runs.append_event("r-1", "note", {"index": index})
        first = RunEvidenceReader(runs).read(request(max_events=3))
        assert first.computed_digest() == first.snapshot_digest
    with store(path) as runs:
        reader = RunEvidenceReader(runs)
        assert reader.read(request(max_events=3)) == first
        runs.append_event("r-1", "note", {"index": 4})
        # The truncated slice is the same evidence after the run grew.
        assert reader.read(request(max_events=3)).snapshot_digest == first.snapshot_digest
        whole = reader.read(request())
        runs.append_event("r-1", "note", {"index": 5})
        assert reader.read(request()).snapshot_digest != whole.snapshot_digest
    assert first.snapshot_digest == digest_bytes(
        "evidence", canonical_json(first.body()).encode("ascii")
    )


def test_evidence_digests_are_golden(golden: SnapshotAssertion) -> None:
    runs = store()
    runs.create_run("session-1", "prompt", run_id="run-1")
    reader = RunEvidenceReader(runs)
    empty = reader.read(request("session-1", "run-1"))
    runs.append_event("run-1", "tool_call", {"tool": "grep", "args": ["-n", "TODO"]})
    runs.append_event("run-1", "note", "é\u2028")
    assert golden == {
        "empty": empty.snapshot_digest,
        "two_events": reader.read(request("session-1", "run-1")).snapshot_digest,
        "truncated": reader.read(request("session-1", "run-1", max_events=1)).snapshot_digest,
        "body": reader.read(request("session-1", "run-1", max_events=1)).public(),
    }


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    payloads=st.lists(
        st.recursive(
            st.none() | st.booleans() | st.integers(-(10**9), 10**9) | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=5), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        max_size=6,
    ),
    max_events=st.integers(min_value=1, max_value=8),
    max_bytes=st.integers(min_value=1, max_value=400),
)
def test_evidence_respects_its_limits(payloads: list[Any], max_events: int, max_bytes: int) -> None:
    runs = store()
    runs.create_run("s-1", "p", run_id="r-1")
    for payload in payloads:
        runs.append_event("r-1", "note", payload)
    snapshot = RunEvidenceReader(runs).read(request(max_events=max_events, max_bytes=max_bytes))
    size = sum(len(canonical_json(event.public()).encode()) for event in snapshot.events)
    assert len(snapshot.events) <= max_events
    assert size <= max_bytes
    assert [event.seq for event in snapshot.events] == list(range(1, len(snapshot.events) + 1))
    assert snapshot.truncated == (len(snapshot.events) < len(payloads))
    assert snapshot.computed_digest() == snapshot.snapshot_digest
    runs.close()


def test_the_baseline_applies_and_rolls_back_with_the_stdlib_sqlite(tmp_path: Path) -> None:
    """DBAs and the older runtime use SQLite 3.40 (stdlib sqlite3): the schema must load there,
    and its down section must leave nothing behind."""
    import sqlite3

    from aios_ledger.shell.db.statements import migration_files

    conn = sqlite3.connect(tmp_path / "stdlib.db")
    named_objects = "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
    for _name, content in migration_files():
        up, down = content.split("-- migrate:up", 1)[1].split("-- migrate:down", 1)
        conn.executescript(up)
        conn.executescript(down)
        assert conn.execute(named_objects).fetchall() == []
        conn.executescript(up)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "run_events", "auxiliary_runs"} <= tables
    conn.close()


def test_auxiliary_run_checks_hold_for_hand_written_rows() -> None:
    from aios_ledger.shell.db.connection import execute

    sqlite_only("hand-written rows go through apsw here")
    runs = store()
    row = {
        "aux_id": "aux-1",
        "session_id": "s",
        "run_id": "r",
        "parent_json": "{}",
        "kind": "k",
        "mode": "ISOLATED",
        "state": "DONE",
        "spec_json": "{}",
        "spec_digest": digest_bytes("spec", b""),
        "evidence_digest": digest_bytes("evidence", b""),
        "owner": "h:1:t",
        "created_at_ms": 1,
    }
    conn = sqlite_database(runs.database).conn
    with pytest.raises(apsw.ConstraintError):
        execute(conn, "insert_auxiliary_run", row)
    execute(conn, "insert_auxiliary_run", {**row, "state": "RUNNING"})
    transition = {
        "aux_id": "aux-1",
        "expected_state": "RUNNING",
        "expected_revision": 1,
        "updated_at_ms": 2,
        "output_json": None,
        "output_digest": None,
        "error_code": None,
        "error": None,
    }
    with pytest.raises(apsw.ConstraintError):
        execute(conn, "transition_auxiliary_run", {**transition, "state": "COMPLETED"})
    with pytest.raises(apsw.ConstraintError):
        execute(conn, "transition_auxiliary_run", {**transition, "state": "FAILED"})
    assert (
        execute(
            conn,
            "transition_auxiliary_run",
            {
                **transition,
                "state": "CANCELLED",
                "error_code": "CANCELLED",
                "error": "CANCELLED: x",
            },
        )
        == 1
    )
    # The CAS: the same guarded write again changes nothing.
    assert (
        execute(
            conn,
            "transition_auxiliary_run",
            {
                **transition,
                "state": "CANCELLED",
                "error_code": "CANCELLED",
                "error": "CANCELLED: x",
            },
        )
        == 0
    )


def test_run_plans_are_golden(golden: SnapshotAssertion) -> None:
    """Creating a run appends a sealed ledger event; appending to it is a CAS on its event
    count, whose answer is the event's row, and a sealed RUN_EVENT_APPENDED event on the
    ledger chain after the creation's, whose seal covers that row."""
    now = Timestamp.parse("2026-08-20T00:00:00Z")
    request = RunCreateRequest.from_mapping({"session_id": "s-1", "prompt": "p", "run_id": "r-1"})
    fresh = LogTail.read(1, [LEDGER_CHAIN], [])
    created = decide_create_run(RunCreateState(None, fresh), request, now=now, actor=ACTOR)
    assert isinstance(created, WritePlan) and created.tail is not None
    run = RunRow.from_row(created.response)
    append = RunEventAppendRequest.from_mapping(
        {"run_id": "r-1", "kind": "note", "payload": {"n": 1}}
    )
    appended = decide_append_run_event(
        RunState(run, tail=created.tail), append, now=now, actor=ACTOR
    )
    (event,) = appended.events
    assert event.event.event_type == "RUN_EVENT_APPENDED" and event.seal.chain_seq == 2
    assert [row.row_key for row in event.rows] == ["r-1 1"]
    again = decide_create_run(RunCreateState(run, created.tail), request, now=now, actor=ACTOR)
    assert again.response == {**run.public(), "idempotent": True}
    assert golden == {"create": attrs.asdict(created), "append": attrs.asdict(appended)}


def test_a_token_appends_only_to_its_own_sessions_runs() -> None:
    """Run ownership is the core's: a caller a token names (HTTP, MCP, the console) appends
    to its own session's runs and is NOT_RUN_OWNER on another's; the command line and the
    library, the owner's own doors, append to any run."""
    now = Timestamp.parse("2026-08-20T00:00:00Z")
    tail = LogTail.read(1, [LEDGER_CHAIN], [])
    run = RunRow("r-1", "alice", "p", 0, now.text, now.text)
    append = RunEventAppendRequest.from_mapping({"run_id": "r-1", "kind": "note", "payload": None})
    state = RunState(run, tail=tail)
    for via in ("http", "mcp", "console"):
        with pytest.raises(LedgerError) as refused:
            decide_append_run_event(state, append, now=now, actor=Actor("bob", via, ("agent",)))
        assert (refused.value.code, refused.value.detail) == (
            "NOT_RUN_OWNER",
            "run 'r-1' is another agent's",
        )
        owner = Actor("alice", via, ("agent",))
        assert decide_append_run_event(state, append, now=now, actor=owner).response["seq"] == 1
    for actor in (ACTOR, Actor("bob", "cli")):
        assert decide_append_run_event(state, append, now=now, actor=actor).response["seq"] == 1


def long_run(events: int) -> RunStore:
    runs = store()
    runs.create_run("s-1", "a long run", run_id="r-1")
    for number in range(events):
        runs.append_event("r-1", "stderr", {"line": f"line {number}"})
    runs.append_event("r-1", "failure", {"exit_status": 3})
    return runs


def test_a_tail_keeps_the_end_of_a_run_longer_than_the_window() -> None:
    runs = long_run(300)
    reader = RunEvidenceReader(runs)
    snapshot = reader.read(request(max_events=20, tail_events=5))
    seqs = [event.seq for event in snapshot.events]
    assert seqs == [*range(1, 16), *range(297, 302)]  # the head, then the run's last events
    assert snapshot.events[-1].kind == "failure" and snapshot.truncated
    assert snapshot.public()["limits"] == {"max_events": 20, "max_bytes": 262144, "tail_events": 5}
    assert snapshot.computed_digest() == snapshot.snapshot_digest
    assert reader.read(request(max_events=20, tail_events=5)) == snapshot  # reproducible
    # Without a tail, the window holds only the head, as before.
    head_only = reader.read(request(max_events=20))
    assert [event.seq for event in head_only.events] == list(range(1, 21))
    assert head_only.body()["limits"] == {"max_events": 20, "max_bytes": 262144}
    # A run that grew past the pinned end reads as other evidence.
    runs.append_event("r-1", "note", "later")
    assert reader.read(request(max_events=20, tail_events=5)).snapshot_digest != (
        snapshot.snapshot_digest
    )


def test_a_tail_stays_within_the_byte_limit_and_the_event_limit() -> None:
    runs = long_run(50)
    reader = RunEvidenceReader(runs)
    one = len(canonical_json(runs.run_events("r-1", limit=1)[0].public()))
    # Room for about four events: the tail comes first, the head takes what is left.
    snapshot = reader.read(request(max_events=100, max_bytes=4 * one + 10, tail_events=3))
    seqs = [event.seq for event in snapshot.events]
    assert seqs[-1] == 51 and snapshot.truncated
    assert sum(len(canonical_json(event.public())) for event in snapshot.events) <= 4 * one + 10
    assert seqs == sorted(set(seqs))
    # A tail as long as the window is the window: the run's last events only.
    last = reader.read(request(max_events=4, tail_events=50))
    assert [event.seq for event in last.events] == [48, 49, 50, 51]
    # A run that fits is read whole, tail or not.
    short = long_run(2)
    whole = RunEvidenceReader(short).read(request(tail_events=8))
    assert [event.seq for event in whole.events] == [1, 2, 3] and not whole.truncated
