"""Governed bindings, execution envelopes and the initial execution projection."""
