"""Attestations of governed commits: the signing key, the facts read from the ledger, the git
note, `why COMMIT` and `verify-attestation`."""
