"""The ledger over its HTTP API, from the client's side: `LedgerClient` (TaskLedger's calls and
a worker's run writes), the HTTP binding resolver of `aios-ledger project`, and reading tokens
from files and systemd credentials."""
