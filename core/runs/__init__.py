"""Runs and their events, and the bounded, digest-pinned evidence read from them."""
