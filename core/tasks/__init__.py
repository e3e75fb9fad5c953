"""The task lifecycle: requests, the transition table, results and decisions."""
