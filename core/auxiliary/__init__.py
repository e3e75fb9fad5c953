"""Auxiliary runs: specs under a capability ceiling, their states and decisions."""
