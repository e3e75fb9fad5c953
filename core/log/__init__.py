"""The tamper-evident log: seals, verification and exports."""
