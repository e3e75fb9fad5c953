"""Chained task rows (v4 seals since issue 27 part 6, v5 on both engines since 1.0): the seal
covers what a transition changed of its chain's task row and a chained row digest, in the seal's
own row, instead of the whole row's image in a second row per event; `verify` folds the changes
back into the row, and a 0.x chain sealed v2 or v3 before goes on from every column."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import attrs
import pytest
from aios_ledger.core.actors import Actor
from aios_ledger.core.log import EventAppend
from aios_ledger.core.log.chained import BROKEN_LINK, ChainedRowFold
from aios_ledger.core.log.legacy_seals import legacy_seal_of
from aios_ledger.core.log.records import SEAL_VERSION_5
from aios_ledger.core.log.rows import TASKS, chained_row_digest, changes_text, row_digest
from aios_ledger.core.log.seals import ChainedRow, chain_of, seal_of, seal_of_stored
from aios_ledger.core.log.tail import LogTail
from aios_ledger.core.records import record_columns
from aios_ledger.core.tasks.records import TaskRow
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.log.export import export_log, verify_export
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.tasks.ledger import TaskLedger
from syrupy.assertion import SnapshotAssertion

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

TASK_COLUMNS = set(record_columns(TaskRow))


def _lifecycle(path: Path, task_id: str = "t-1") -> None:
    with TaskLedger(path) as ledger:
        ledger.create_task(
            {"task_id": task_id, "goal": "g", "instructions": "i", "success_criteria": ["ok"]},
            idempotency_key=f"create-{task_id}",
        )
        claim = ledger.claim(agent_id="a", capabilities=[], lease_seconds=60, task_id=task_id)
        assert claim is not None
        # A longer lease than the claim's, so the heartbeat moves the expiry even when it falls
        # in the claim's millisecond.
        ledger.heartbeat(task_id, lease_token=claim["lease_token"], lease_seconds=120)
        ledger.submit_result(
            task_id,
            lease_token=claim["lease_token"],
            result={"x": 1},
            idempotency_key=f"s-{task_id}",
        )


def _seals(path: Path, chain: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(path)
    try:
        return con.execute(
            "SELECT event_id, seal_version, row_changes, chained_row_digest FROM event_seals "
            "WHERE chain = ? ORDER BY chain_seq",
            (chain,),
        ).fetchall()
    finally:
        con.close()


def _sql(path: Path, *statements: str) -> None:
    """The DBA's sqlite3 shell (or an attacker holding the file): no trigger in the way."""
    con = sqlite3.connect(path)
    try:
        for trigger in ("event_seals_refuse_update", "events_refuse_update"):
            con.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        for statement in statements:
            con.execute(statement)
        con.commit()
    finally:
        con.close()


def _report(path: Path) -> dict[str, Any]:
    with Database(path) as db:
        return verify_log(db).public()


def test_a_task_row_is_sealed_as_its_changes_in_the_seals_own_row(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _lifecycle(path)
    seals = _seals(path, "task:t-1")
    assert [version for _, version, _, _ in seals] == [SEAL_VERSION_5] * 4
    created, claimed, beat, submitted = (json.loads(changes) for _, _, changes, _ in seals)
    # The first write of the row holds every column; each later one what it changed.
    assert set(created) == TASK_COLUMNS
    moved = {"status", "attempt", "claimed_by", "lease_token_hash", "lease_expires_at", "revision"}
    assert moved <= set(claimed) <= moved | {"updated_at"}
    assert "lease_expires_at" in beat and "goal" not in beat and "status" not in beat
    assert {"status", "result_json", "result_digest"} <= set(submitted)
    # Each chained digest is over the one before and the changes.
    previous = None
    for _, _, changes, digest in seals:
        assert digest == chained_row_digest(previous, TASKS, "t-1", changes)
        previous = digest
    # No image of the task row in a second row; the recorded answers and the run still have theirs.
    con = sqlite3.connect(path)
    try:
        tables = {row[0] for row in con.execute("SELECT row_table FROM event_seal_rows")}
    finally:
        con.close()
    assert tables == {"task_idempotency", "runs"}
    found = _report(path)
    assert found["intact"] is True, found["findings"]


def test_the_fold_of_the_changes_is_the_row(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _lifecycle(path)
    fold = ChainedRowFold("t-1")
    for event_id, _, changes, digest in _seals(path, "task:t-1"):
        fold.add(event_id, changes, digest)
    with TaskLedger(path) as ledger:
        task = ledger.get("t-1")
    folded = fold.columns()
    assert folded is not None
    assert {name: folded[name] for name in ("status", "revision", "attempt")} == {
        "status": task["status"],
        "revision": task["revision"],
        "attempt": task["attempt"],
    }
    sealed = fold.sealed()
    assert sealed is not None and sealed[0] == _seals(path, "task:t-1")[-1][0]


def test_a_broken_chain_of_digests_is_named_by_the_fold() -> None:
    fold = ChainedRowFold("t-1")
    first = '{"goal":"g"}'
    fold.add(1, first, chained_row_digest(None, TASKS, "t-1", first))
    fold.add(2, '{"goal":"h"}', "sha256:" + "0" * 64)
    assert fold.problem == (2, BROKEN_LINK)
    assert fold.sealed() == (2, None)


@pytest.mark.parametrize(
    "statement",
    [
        # A column no transition after the first changed: only the fold of the first proves it.
        "UPDATE tasks SET goal = 'other' WHERE task_id = 't-1'",
        "UPDATE tasks SET attempt = 7 WHERE task_id = 't-1'",
        "DELETE FROM tasks WHERE task_id = 't-1'",
    ],
)
def test_a_task_row_tampered_with_under_v4_is_named(tmp_path: Path, statement: str) -> None:
    path = tmp_path / "ledger.db"
    _lifecycle(path)
    _lifecycle(path, "t-2")
    _sql(path, "PRAGMA foreign_keys = OFF", statement)
    found = _report(path)
    assert found["finding_counts"] == {"STATE_MISMATCH": 1}, found["findings"]
    assert [(f["table"], f["key"]) for f in found["findings"]] == [("tasks", "t-1")]


def test_changes_rewritten_in_a_seal_are_content_changed(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _lifecycle(path)
    event_id = _seals(path, "task:t-1")[1][0]
    _sql(
        path,
        "UPDATE event_seals SET row_changes = replace(row_changes, '\"a\"', '\"mallory\"') "
        f"WHERE event_id = {event_id}",
    )
    found = _report(path)
    assert found["intact"] is False
    assert {"CONTENT_CHANGED"} <= set(found["finding_counts"]), found["findings"]
    assert event_id in {finding["event_id"] for finding in found["findings"]}


def test_the_export_folds_the_changes_offline(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _lifecycle(path)
    exported = tmp_path / "export.jsonl"
    with Database(path) as db, exported.open("w") as out:
        export_log(db, out, task_id=None)
    assert verify_export(exported).intact
    _sql(path, "UPDATE tasks SET goal = 'other' WHERE task_id = 't-1'")
    with Database(path) as db, exported.open("w") as out:
        export_log(db, out, task_id=None)
    found = verify_export(exported).public()
    assert found["finding_counts"] == {"STATE_MISMATCH": 1}, found["findings"]


def test_an_image_of_the_task_row_ends_the_chained_digest() -> None:
    """A seal with neither changes nor a chained digest ends the digest: a 0.x v1, v2 or v3
    seal (which carried none on), and such a seal sealed again by `upgrade` (a v2 or v3 one
    keeps its image of the task row): the next chained write starts from every column."""
    first = changes_text(_task()._asdict())
    again = changes_text(_task(goal="h", revision=3)._asdict())
    fold = ChainedRowFold("t-1")
    fold.add(1, first, chained_row_digest(None, TASKS, "t-1", first))
    fold.add(2, None, None)
    fold.add(3, again, chained_row_digest(None, TASKS, "t-1", again))
    assert fold.problem is None
    assert fold.sealed() == (3, row_digest(TASKS, "t-1", _task(goal="h", revision=3)._asdict()))
    # A seal that wrote no task row carries the chain's digest on, or it is a broken link.
    broken = ChainedRowFold("t-1")
    broken.add(1, first, chained_row_digest(None, TASKS, "t-1", first))
    broken.add(2, None, "sha256:" + "1" * 64)
    assert broken.problem == (2, BROKEN_LINK)


def test_the_fast_chained_seal_equals_the_checked_one() -> None:
    event = EventAppend(
        "t-1", "a", "TASK_CLAIMED", {"n": 1}, "2026-08-20T00:00:00.000Z", actor=ACTOR
    )
    tail = LogTail.read(7, [chain_of("t-1")], [])
    appended, _ = tail.append([event])
    row = appended[0].event
    chained = ChainedRow('{"status":"CLAIMED"}', "sha256:" + "1" * 64)
    assert seal_of_stored(row, 1, "p", (), chained=chained) == seal_of(
        row, 1, "p", (), chained=chained
    )
    # 0.x's v4 seal is the same document over the event id too.
    assert legacy_seal_of(row, 1, "p", (), 4, chained) != seal_of(row, 1, "p", (), chained=chained)


def _task(**changes: Any) -> TaskRow:
    base = TaskRow(
        task_id="t-1",
        goal="g",
        instructions="i",
        success_criteria_json="[]",
        required_capabilities_json="[]",
        constraints_json="{}",
        metadata_json="{}",
        deadline=None,
        priority=0,
        max_attempts=3,
        attempt=0,
        status="QUEUED",
        claimed_by=None,
        lease_token_hash=None,
        lease_expires_at=None,
        result_json=None,
        result_digest=None,
        result_idempotency_key=None,
        verification_json=None,
        revision=1,
        created_at="2026-08-20T00:00:00.000Z",
        updated_at="2026-08-20T00:00:00.000Z",
        seq=1,
    )
    return base._replace(**changes)


def test_golden_v5_seals(golden: SnapshotAssertion) -> None:
    """A task's insert and a move of it, sealed v5 onto an empty chain: the log format's
    golden (the row changes, the chained digests and the seals over them)."""
    created = _task()
    claimed = created._replace(
        status="CLAIMED",
        attempt=1,
        claimed_by="a",
        revision=2,
        updated_at="2026-08-20T00:00:01.000Z",
    )
    events = [
        EventAppend(
            "t-1",
            None,
            "TASK_CREATED",
            {},
            created.updated_at,
            written=created.written(None),
            actor=ACTOR,
        ),
        EventAppend(
            "t-1",
            "a",
            "TASK_CLAIMED",
            {},
            claimed.updated_at,
            written=claimed.written(created),
            actor=ACTOR,
        ),
    ]
    tail = LogTail.read(1, [chain_of("t-1")], [])
    appended, after = tail.append(events)
    assert after.tips[chain_of("t-1")].chained_row_digest == appended[1].seal.chained_row_digest
    assert appended[1].rows == ()
    fold = ChainedRowFold("t-1")
    for item in appended:
        seal = item.seal
        fold.add(seal.event_id, seal.row_changes, seal.chained_row_digest)
    assert fold.sealed() == (2, row_digest(TASKS, "t-1", claimed._asdict()))
    assert golden == [attrs.asdict(item.seal) for item in appended]


def test_an_events_written_row_is_its_own_tasks() -> None:
    with pytest.raises(ValueError, match="its own task"):
        EventAppend(
            "t-2", None, "TASK_CREATED", {}, "x", written=_task().written(None), actor=ACTOR
        )


def test_the_fast_changes_text_equals_the_checked_one() -> None:
    before = _task()
    after = before._replace(status="CLAIMED", claimed_by="é", attempt=1, revision=2)
    for full in (True, False):
        written = after.written(before)
        changed = written._changed(full)
        assert written.changes(full=full) == changes_text(changed)
        assert json.loads(written.changes(full=full)) == changed
    assert set(json.loads(after.written(before).changes(full=False))) == {
        "status",
        "claimed_by",
        "attempt",
        "revision",
    }
