"""The API tokens' sealed table, as the log reads it back (`core.log.tables`)."""

from aios_ledger.core.api.tokens import ApiTokenRow
from aios_ledger.core.log.rows import API_TOKENS
from aios_ledger.core.log.tables import SealedTable

SEALED_TABLES: tuple[SealedTable, ...] = (SealedTable(API_TOKENS, "name", ApiTokenRow),)
