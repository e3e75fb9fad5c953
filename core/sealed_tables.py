"""The catalogue of tables, gathered once from the domains that declare them and the log's own, in
the order a copy writes them (the one foreign keys need)."""

from types import MappingProxyType

from aios_ledger.core.api.tables import TABLES as API_TABLES
from aios_ledger.core.attest.tables import TABLES as ATTEST_TABLES
from aios_ledger.core.auxiliary.tables import TABLES as AUXILIARY_TABLES
from aios_ledger.core.git.tables import TABLES as GIT_TABLES
from aios_ledger.core.log.idempotency import RECORDED_ANSWERS_TABLE
from aios_ledger.core.log.tables import (
    EVENT_TABLES,
    MERKLE_TABLES,
    SealedTable,
    SealedTables,
    Table,
)
from aios_ledger.core.projection.tables import TABLES as PROJECTION_TABLES
from aios_ledger.core.runs.tables import TABLES as RUN_TABLES
from aios_ledger.core.tasks.tables import SPEND_TABLE, TASKS_TABLE

TABLES: tuple[Table | SealedTable, ...] = (
    TASKS_TABLE,
    *EVENT_TABLES,
    RECORDED_ANSWERS_TABLE,
    *PROJECTION_TABLES,
    *RUN_TABLES,
    *AUXILIARY_TABLES,
    *API_TABLES,
    *GIT_TABLES,
    *ATTEST_TABLES,
    SPEND_TABLE,
    *MERKLE_TABLES,
)
BY_NAME = MappingProxyType({table.name: table for table in TABLES})
if len(BY_NAME) != len(TABLES):
    raise ValueError("a table is declared twice")
SEALED_TABLES: SealedTables = MappingProxyType(
    {table.name: table for table in TABLES if isinstance(table, SealedTable)}
)
# The tables whose rows the sealed log proves.
STATE_TABLES: tuple[str, ...] = tuple(SEALED_TABLES)
