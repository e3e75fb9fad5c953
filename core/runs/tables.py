"""The runs' sealed tables, as the log reads them back (`core.log.tables`)."""

from aios_ledger.core.log.records import EventRow
from aios_ledger.core.log.rows import RUN_EVENTS, RUNS
from aios_ledger.core.log.tables import SealedTable
from aios_ledger.core.runs.evidence import RUN_CREATED
from aios_ledger.core.runs.records import RunEventRow
from aios_ledger.core.tasks.attempts import RunIdentity


def _creates_run(event: EventRow) -> bool:
    return event.event_type == RUN_CREATED


SEALED_TABLES: tuple[SealedTable, ...] = (
    SealedTable(RUNS, "run_id", RunIdentity, unsealed_writer=_creates_run),
    # Keyed by two columns: the statement selects their `run_event_key` beside them.
    SealedTable(RUN_EVENTS, "run_event_key", RunEventRow),
)
