"""The API tokens' sealed table, as the log reads it back and the statements render it
(`core.log.tables`)."""

from aios_ledger.core.api.tokens import API_TOKENS, ApiTokenRow
from aios_ledger.core.log.tables import SealedTable

TABLES = (SealedTable(API_TOKENS, "name", ApiTokenRow, insert="api_token_insert"),)
