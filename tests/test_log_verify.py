"""`verify` over a real database: every kind of tampering is found at the right event id."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import EventRow, LedgerError
from aios_ledger.core.log import LedgerHead
from aios_ledger.core.log.seals import ChainedRow, seal_of
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.log.verification import ledger_head, verify_log
from conftest import both_engines, is_postgres
from test_log_support import (
    ROUND_ROBIN,
    build_log,
    codes_at,
    content_of,
    raw_rows,
    set_content,
    tamper,
)

pytest_generate_tests = both_engines


@pytest.fixture
def log(ledger_target: Path) -> Path:
    path = ledger_target
    ids = build_log(path, ROUND_ROBIN)
    assert ids == list(range(1, len(ROUND_ROBIN) + 1))
    return path


def chain_codes(report: dict[str, Any]) -> set[tuple[str, int | None]]:
    """The findings of the chains and heads, without the Merkle log's (which finds every
    tampering below too: its leaves are of the seals as they were)."""
    return {found for found in codes_at(report) if found[0] != "MERKLE_MISMATCH"}


def merkle_found(report: dict[str, Any]) -> bool:
    return any(finding["code"] == "MERKLE_MISMATCH" for finding in report["findings"])


def verify(path: Path, head: LedgerHead | None = None) -> dict[str, Any]:
    with Database(path) as db:
        return verify_log(db, head=head).public()


def head_of(path: Path) -> LedgerHead:
    with Database(path) as db:
        return ledger_head(db)


def test_an_untouched_log_is_intact(log: Path) -> None:
    report = verify(log)
    assert report["intact"] is True
    assert report["events"] == report["sealed"] == len(ROUND_ROBIN)
    assert report["findings"] == []
    assert report["head"] == head_of(log).public()


def test_an_empty_log_is_intact(ledger_target: Path) -> None:
    with Database(ledger_target) as db:
        report = verify_log(db).public()
        assert report["intact"] is True
        assert report["head"]["events"] == 0
        assert verify_log(db, head=ledger_head(db)).intact


def test_the_append_only_triggers_still_refuse_edits(log: Path) -> None:
    with Database(log) as db, pytest.raises(LedgerError, match="EVENTS_APPEND_ONLY"):
        db.write_schema(lambda conn: conn.execute("DELETE FROM events WHERE event_id = 1"))


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("payload_json", '{"n":99,"note":"\\u00e9"}'),
        ("event_type", "TASK_CANCELLED"),
        ("created_at", "2026-08-21T00:00:00Z"),
        ("agent_id", "agent-evil"),
        ("task_id", "t-b"),
        ("task_id", None),
        ("payload_json", b"{}"),
        ("created_at", 17),
        ("actor", "operator-evil"),
        ("actor", 17),
        ("actor", b"operator"),
        ("actor", 1.5),
    ],
)
def test_a_changed_field_is_content_changed(log: Path, column: str, value: object) -> None:
    tamper(log, (f"UPDATE events SET {column} = ? WHERE event_id = 5", (value,)))
    report = verify(log)
    assert report["intact"] is False
    assert codes_at(report) == {("CONTENT_CHANGED", 5)}


def test_a_middle_event_deleted_with_its_seal_is_removed(log: Path) -> None:
    # Event 5 is t-a's second event; t-a continues at 7.
    tamper(
        log,
        ("DELETE FROM events WHERE event_id = 5", ()),
        ("DELETE FROM event_seals WHERE event_id = 5", ()),
    )
    report = verify(log)
    # PostgreSQL's ids have gaps by design: the chain alone finds it there.
    removed = set() if is_postgres(log) else {("EVENT_REMOVED", 5)}
    assert chain_codes(report) == {*removed, ("CHAIN_GAP", 7)}
    assert merkle_found(report)  # the event's leaf is left without it
    assert report["events"] == len(ROUND_ROBIN) - 1


def test_a_middle_event_deleted_without_its_seal_is_removed(log: Path) -> None:
    tamper(log, ("DELETE FROM events WHERE event_id = 6", ()))
    report = verify(log)
    assert codes_at(report) == {("EVENT_REMOVED", 6)}
    (finding,) = report["findings"]
    assert finding["chain"] == "task:t-b"
    assert "seal is left" in finding["detail"]


def test_swapped_content_is_reported_on_both_events(log: Path) -> None:
    first, second = content_of(log, 1), content_of(log, 5)
    tamper(log, set_content(log, 1, second), set_content(log, 5, first))
    report = verify(log)
    assert codes_at(report) == {("EVENT_SWAPPED", 1), ("EVENT_SWAPPED", 5)}


def test_swapped_content_across_chains_is_reported(log: Path) -> None:
    first, second = content_of(log, 2), content_of(log, 10)
    tamper(log, set_content(log, 2, second), set_content(log, 10, first))
    assert codes_at(verify(log)) == {("EVENT_SWAPPED", 2), ("EVENT_SWAPPED", 10)}


def test_swapped_seals_are_reordered(log: Path) -> None:
    # Give event 1 the seal of event 5 and back: chain order now disagrees with event ids.
    tamper(
        log,
        ("UPDATE event_seals SET event_id = -1 WHERE event_id = 1", ()),
        ("UPDATE event_seals SET event_id = 1 WHERE event_id = 5", ()),
        ("UPDATE event_seals SET event_id = 5 WHERE event_id = -1", ()),
    )
    found = codes_at(verify(log))
    assert ("EVENT_REORDERED", 1) in found
    assert {("EVENT_SWAPPED", 1), ("EVENT_SWAPPED", 5)} <= found


def test_an_event_inserted_without_a_seal_is_unsealed(log: Path) -> None:
    tamper(
        log,
        (
            "INSERT INTO events(task_id, agent_id, event_type, payload_json, created_at) "
            "VALUES ('t-a', 'mallory', 'TASK_VERIFIED', '{}', '2026-08-20T00:00:00Z')",
            (),
        ),
    )
    report = verify(log)
    assert codes_at(report) == {("UNSEALED_EVENT", len(ROUND_ROBIN) + 1)}
    assert report["unsealed"] == 1


def _forge(path: Path, *, prev_seal: str, seal: str | None = None) -> int:
    event_id = len(ROUND_ROBIN) + 1
    tip = raw_rows(path, "SELECT max(chain_seq) FROM event_seals WHERE chain = ?", ("task:t-a",))[
        0
    ][0]
    content = ("t-a", "mallory", "TASK_VERIFIED", "{}", "2026-08-20T00:00:00Z")
    forged = EventRow(event_id, *content)
    tamper(
        path,
        (
            "INSERT INTO events(event_id, task_id, agent_id, event_type, payload_json, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (event_id, *content),
        ),
        (
            "INSERT INTO event_seals(event_id, chain, chain_seq, prev_seal, seal) "
            "VALUES (?, 'task:t-a', ?, ?, ?)",
            (event_id, tip + 1, prev_seal, seal or seal_of(forged, tip + 1, prev_seal)),
        ),
    )
    return event_id


def test_an_event_inserted_with_a_forged_seal_is_forged(log: Path) -> None:
    event_id = _forge(log, prev_seal="sha256:" + "1" * 64)
    report = verify(log)
    assert chain_codes(report) == {("FORGED_EVENT", event_id)}
    # SQLite: no leaf is of the forged event. PostgreSQL's integrator appends what is committed
    # without judging it, and verify integrates first: the chains are what find it there.
    assert merkle_found(report) is not is_postgres(log)


def test_a_forged_seal_that_does_not_verify_is_found(log: Path) -> None:
    tip_seal = raw_rows(
        log, "SELECT seal FROM event_seals WHERE chain = 'task:t-a' ORDER BY chain_seq DESC"
    )[0][0]
    event_id = _forge(log, prev_seal=tip_seal, seal="sha256:" + "2" * 64)
    report = verify(log)
    assert report["intact"] is False
    assert {event for _, event in codes_at(report)} == {event_id}


def test_a_resealed_edit_breaks_the_next_link_and_the_head(log: Path) -> None:
    head = head_of(log)
    query = (
        "SELECT chain_seq, prev_seal, row_changes, chained_row_digest FROM event_seals "
        "WHERE event_id = 5"
    )
    row = raw_rows(log, query)[0]
    content = ("t-a", "agent-2", "TASK_HEARTBEAT", '{"n":1000}', "2026-08-20T00:00:05Z")
    # The log's seals cover the event, the rows it wrote (none here) and its chained task row.
    # The attacker keeps the event's actor, which the seal covers too.
    actor = raw_rows(log, "SELECT actor FROM events WHERE event_id = 5")[0][0]
    chained = ChainedRow(row[2], row[3])
    resealed = seal_of(EventRow(5, *content, actor), row[0], row[1], (), chained=chained)
    tamper(
        log,
        set_content(log, 5, content),
        ("UPDATE event_seals SET seal = ? WHERE event_id = 5", (resealed,)),
    )
    report = verify(log)
    (finding,) = [found for found in report["findings"] if found["code"] != "MERKLE_MISMATCH"]
    assert (finding["code"], finding["event_id"], finding["other_event_id"]) == (
        "FORGED_EVENT",
        7,
        5,
    )
    assert merkle_found(report)  # event 5's leaf is of its first seal
    assert ("HEAD_MISMATCH", head.last_event_id) in codes_at(verify(log, head))


def test_newest_events_removed_are_found_with_the_head(log: Path) -> None:
    head = head_of(log)
    last = len(ROUND_ROBIN)
    tamper(
        log,
        ("DELETE FROM events WHERE event_id >= ?", (last - 1,)),
        ("DELETE FROM event_seals WHERE event_id >= ?", (last - 1,)),
        # A careful attacker also winds back the id counter.
        ("UPDATE sqlite_sequence SET seq = ? WHERE name = 'events'", (last - 2,)),
    )
    # The chains alone cannot tell; the Merkle log keeps the removed events' leaves.
    alone = verify(log)
    assert chain_codes(alone) == set() and merkle_found(alone)
    report = verify(log, head)
    if is_postgres(log):
        # Its ids have gaps by design: the head says its last event existed, not which before.
        assert chain_codes(report) == {("EVENT_REMOVED", last)}
    else:
        assert chain_codes(report) == {("EVENT_REMOVED", last - 1), ("EVENT_REMOVED", last)}
    assert report["head_checked"] == head.public()


def test_newest_events_removed_are_found_by_the_id_counter(log: Path) -> None:
    if is_postgres(log):
        pytest.skip(
            "PostgreSQL's ids have gaps by design: a removed newest event is found with a head, "
            "or by the state rows its seal covered"
        )
    last = len(ROUND_ROBIN)
    tamper(
        log,
        ("DELETE FROM events WHERE event_id = ?", (last,)),
        ("DELETE FROM event_seals WHERE event_id = ?", (last,)),
    )
    assert chain_codes(verify(log)) == {("EVENT_REMOVED", last)}


def test_an_old_head_still_verifies_after_the_log_grew(log: Path) -> None:
    head = head_of(log)
    build_log(log, ["t-a", "t-z", None], start=100)
    report = verify(log, head)
    assert report["intact"] is True
    assert report["events"] == head.events + 3


def test_a_head_from_another_log_is_a_mismatch(log: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.db"  # the other log on SQLite: a head is a head
    build_log(other, ROUND_ROBIN, start=1)
    report = verify(log, head_of(other))
    assert codes_at(report) == {("HEAD_MISMATCH", len(ROUND_ROBIN))}


def test_a_rewritten_history_with_all_seals_recomputed_fails_the_head(log: Path) -> None:
    head = head_of(log)
    tamper(log, ("DELETE FROM event_seals", ()))
    with Database(log) as db:  # re-seal everything with the ledger's own code
        from aios_ledger.shell.db.adoption import seal_unsealed_events

        db.write(seal_unsealed_events)
        # The chains verify; the Merkle log's leaves are of the seals the ledger wrote.
        assert chain_codes(verify_log(db).public()) == set()
    tamper(log, ("UPDATE events SET payload_json = '{}' WHERE event_id = 3", ()))
    tamper(log, ("DELETE FROM event_seals", ()))
    with Database(log) as db:
        db.write(seal_unsealed_events)
        rewritten = verify_log(db).public()
        # Without a key, only a head kept elsewhere tells, or the Merkle log left as it was.
        assert chain_codes(rewritten) == set() and merkle_found(rewritten)
        assert ("HEAD_MISMATCH", head.last_event_id) in codes_at(verify_log(db, head=head).public())


def test_progress_hook_is_told_the_count(log: Path) -> None:
    told: list[tuple[int, int]] = []
    with Database(log) as db:
        verify_log(db, progress=lambda done, total: told.append((done, total)))
    assert told[-1] == (len(ROUND_ROBIN), len(ROUND_ROBIN))


def test_many_findings_are_capped_but_counted(ledger_target: Path) -> None:
    path = ledger_target
    build_log(path, ["t-a"] * 1200)
    tamper(path, ("UPDATE events SET payload_json = '{}'", ()))
    with Database(path) as db:
        report = verify_log(db)
    assert report.finding_counts == {"CONTENT_CHANGED": 1200}
    assert len(report.findings) == 1000
    assert report.findings_truncated


def test_verify_reads_a_snapshot_and_writes_nothing(log: Path) -> None:
    before = raw_rows(log, "SELECT * FROM event_seals ORDER BY event_id")
    tamper(log, ("UPDATE events SET payload_json = '{}' WHERE event_id = 2", ()))
    verify(log)
    assert raw_rows(log, "SELECT * FROM event_seals ORDER BY event_id") == before
    if is_postgres(log):
        return
    con = sqlite3.connect(log)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
