"""The console pages' reads (sql/console.sql) on both engines: each runs and answers what the
ledger holds (the claimed task and its agent's heartbeat, the hourly counts, the verdicts)."""

from __future__ import annotations

from pathlib import Path

from aios_ledger.shell.db.connection import Database, fetch_all
from aios_ledger.shell.tasks.ledger import TaskLedger
from conftest import both_engines

pytest_generate_tests = both_engines

WINDOW = {"after": 0, "limit": 10}


def test_the_console_reads_answer_on_each_engine(ledger_target: Path | str) -> None:
    with Database(ledger_target) as db:
        ledger = TaskLedger(database=db)
        for n in range(3):
            ledger.create_tasks([({"goal": f"g{n}", "instructions": "i"}, f"k-{n}")])
        claimed = ledger.claim(agent_id="agent-a", capabilities=[], lease_seconds=60)
        assert claimed is not None
        ledger.heartbeat(claimed["task_id"], lease_token=claimed["lease_token"], lease_seconds=60)

        def read(conn: object) -> dict[str, list[dict[str, object]]]:
            return {
                name: [dict(row) for row in fetch_all(conn, name, params)]  # type: ignore[arg-type]
                for name, params in {
                    "console_tasks_held": {"limit": 10},
                    "console_last_heartbeats": WINDOW,
                    "console_event_counts": {"after": 0},
                    "console_verdicts": {"after": 0},
                    "console_writer_leases_held": {"limit": 10},
                    "console_branch_moves": {"limit": 10},
                    "console_checkpoints_recent": {"limit": 10},
                    "console_archive_history": {"limit": 10},
                }.items()
            }

        found = db.read(read)
    assert [(row["task_id"], row["claimed_by"]) for row in found["console_tasks_held"]] == [
        (claimed["task_id"], "agent-a")
    ]
    assert [(row["agent_id"], row["beats"]) for row in found["console_last_heartbeats"]] == [
        ("agent-a", 2)
    ]
    counts = {row["event_type"]: row["events"] for row in found["console_event_counts"]}
    assert counts["TASK_CREATED"] == 3 and counts["TASK_HEARTBEAT"] == 1
    assert all(len(str(row["hour"])) == 13 for row in found["console_event_counts"])
    for empty in ("console_verdicts", "console_writer_leases_held", "console_branch_moves"):
        assert found[empty] == []
