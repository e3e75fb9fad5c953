-- migrate:up
-- The attestations of landed governed writes (issue 28, part 5): for each write that moved a
-- branch, the note attached to its commit under refs/notes/aios-attestations (an in-toto
-- Statement v1 of SLSA Provenance v1 and one of a SLSA Verification Summary Attestation v1,
-- each in a DSSE envelope signed with the ledger's Ed25519 key), inserted with its sealed
-- COMMIT_ATTESTED event and never changed. Numbered 0019 on both engines.
CREATE TABLE commit_attestations(
  idempotency_key TEXT PRIMARY KEY REFERENCES governed_writes(idempotency_key),
  task_id TEXT NOT NULL,
  repository TEXT NOT NULL,
  commit_oid TEXT NOT NULL,
  keyid TEXT NOT NULL,
  note_json TEXT NOT NULL,
  provenance_sha256 TEXT NOT NULL,
  review_sha256 TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX commit_attestations_by_commit ON commit_attestations(commit_oid, repository);
-- `why COMMIT` finds the writes that landed a commit by its id.
CREATE INDEX governed_writes_by_new_oid ON governed_writes(new_oid);

-- migrate:down
DROP INDEX governed_writes_by_new_oid;
DROP INDEX commit_attestations_by_commit;
DROP TABLE commit_attestations;
