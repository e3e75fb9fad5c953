"""Every sealed table, gathered from the domains that declare them, in the log's order
(`STATE_TABLES`): what the shell hands the log's verify, export, archive and restore code."""

from collections.abc import Iterable
from types import MappingProxyType

from aios_ledger.core.api.tables import SEALED_TABLES as API_TABLES
from aios_ledger.core.attest.tables import SEALED_TABLES as ATTEST_TABLES
from aios_ledger.core.auxiliary.tables import SEALED_TABLES as AUXILIARY_TABLES
from aios_ledger.core.git.tables import SEALED_TABLES as GIT_TABLES
from aios_ledger.core.log.idempotency import FIRST_ANSWERS_TABLE
from aios_ledger.core.log.rows import STATE_TABLES
from aios_ledger.core.log.tables import SealedTable, SealedTables
from aios_ledger.core.projection.tables import SEALED_TABLES as PROJECTION_TABLES
from aios_ledger.core.runs.tables import SEALED_TABLES as RUN_TABLES
from aios_ledger.core.tasks.tables import SEALED_TABLES as TASK_TABLES


def in_state_order(declared: Iterable[SealedTable]) -> SealedTables:
    """The declared tables by name, in `STATE_TABLES` order; refused unless they are exactly
    those tables, each declared once."""
    tables = tuple(declared)
    by_name = {table.name: table for table in tables}
    if len(by_name) != len(tables) or set(by_name) != set(STATE_TABLES):
        raise ValueError(f"sealed tables {sorted(by_name)} are not {sorted(STATE_TABLES)}")
    return MappingProxyType({name: by_name[name] for name in STATE_TABLES})


SEALED_TABLES: SealedTables = in_state_order(
    (
        *TASK_TABLES,
        FIRST_ANSWERS_TABLE,
        *RUN_TABLES,
        *AUXILIARY_TABLES,
        *PROJECTION_TABLES,
        *GIT_TABLES,
        *API_TABLES,
        *ATTEST_TABLES,
    )
)
