"""Registered bindings and the initial execution projection store, and their commands."""
