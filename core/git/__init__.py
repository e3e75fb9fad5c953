"""Governed writes to git, purely: which repositories are governed, what a proposal's facts
are, and when the ledger may move a branch (decisions over rows the shell read from SQL and
descriptions it read from git)."""
