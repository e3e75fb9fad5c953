"""Small programs that show how an agent, a reviewer and an owner use the ledger."""
