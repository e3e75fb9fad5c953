"""The runs' tables, as the log reads the sealed ones back and the statements render them
(`core.log.tables`)."""

from aios_ledger.core.log.rows import RUN_EVENTS, RUNS
from aios_ledger.core.log.tables import SealedTable, Table
from aios_ledger.core.runs.evidence import RUN_CREATED
from aios_ledger.core.runs.records import RunEventRow
from aios_ledger.core.tasks.attempts import RunIdentity

TABLES = (
    SealedTable(
        RUNS,
        "run_id",
        RunIdentity,
        unsealed_writer=lambda event: event.event_type == RUN_CREATED,
        # The event count and last change are the run's, not its sealed identity's.
        columns="run_id session_id prompt event_count created_at updated_at",
        insert="restore_run",
        history="sealed_history_of_runs",
        of_task="of_task_by_session",
        delete="delete_archived_runs",
    ),
    SealedTable(
        RUN_EVENTS,
        "run_event_key",
        RunEventRow,
        key_columns="run_id seq",
        insert="insert_run_event",
        history="sealed_history_of_run_events",
        lookup="run_event_of_row_key",
        of_task="of_task_by_session_runs",
        delete="delete_archived_run_events",
    ),
    # The runs whose events were appended before appends were sealed (0.x migration 0014).
    Table("run_events_before_seals", key_columns="run_id", columns="run_id last_seq"),
)
