"""The run store and its commands."""
