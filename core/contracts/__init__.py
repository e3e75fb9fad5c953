"""JSON Schema result contracts, one file per action, shipped as package data."""
