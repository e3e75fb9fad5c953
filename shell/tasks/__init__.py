"""`TaskLedger` and the task commands."""
