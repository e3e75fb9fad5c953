"""What an adapter's database holds once a cell ends, as one JSON object on stdout.

    python count_jobs.py SYSTEM PORT EXIT_CODE TIMEOUT_S

The harness estimates jobs lost from its rate samples (enqueued minus completed over the chaos
and recovery phases), which counts a backlog still queued as lost; the rows say which jobs
ended, failed or were still waiting, and (for the ledger) whether any task was completed twice.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import psycopg

# Per adapter: its database, its jobs by state, and the state a finished job ends in.
QUERIES = {
    "aios-ledger": (
        "aios_ledger_bench",
        "SELECT status, count(*) FROM aios_ledger.tasks GROUP BY status",
        "SUCCEEDED",
    ),
    "procrastinate": (
        "procrastinate_bench",
        "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY status",
        "succeeded",
    ),
}
# Ledger tasks verified more than once, and tasks claimed again after a lapsed lease.
LEDGER_TWICE = (
    "SELECT count(*) FROM (SELECT task_id FROM aios_ledger.events"
    " WHERE event_type = 'TASK_VERIFIED' GROUP BY task_id HAVING count(*) > 1) AS twice"
)
LEDGER_REDELIVERED = "SELECT count(*) FROM aios_ledger.tasks WHERE attempt > 1"


def count(system: str, port: int) -> dict[str, Any]:
    database, by_state, finished = QUERIES[system]
    url = f"postgresql://bench@127.0.0.1:{port}/{database}"
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        states = {str(state): int(n) for state, n in conn.execute(by_state).fetchall()}
        found: dict[str, Any] = {"jobs_by_state": states, "jobs_total": sum(states.values())}
        found["jobs_finished"] = states.get(finished, 0)
        found["jobs_unfinished"] = found["jobs_total"] - found["jobs_finished"]
        if system == "aios-ledger":
            found["jobs_completed_twice"] = int(conn.execute(LEDGER_TWICE).fetchone()[0])  # type: ignore[index]
            found["jobs_redelivered"] = int(conn.execute(LEDGER_REDELIVERED).fetchone()[0])  # type: ignore[index]
    return found


def main(argv: list[str]) -> int:
    system, port, exit_code, timeout_s = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    answer: dict[str, Any] = {
        "system": system,
        "exit_code": exit_code,
        # `timeout --signal=KILL` ends a cell that outlives its limit with 137.
        "timed_out": exit_code == 137,
        "timeout_s": timeout_s,
    }
    try:
        answer.update(count(system, port))
    except psycopg.Error as error:
        answer["count_error"] = type(error).__name__
    print(json.dumps(answer, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
