"""The HTTP API: `aios-ledger serve` (Starlette on uvicorn) and `aios-ledger token`."""
