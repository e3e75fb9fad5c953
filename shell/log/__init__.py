"""Appending sealed events, verifying the log and exporting it."""
