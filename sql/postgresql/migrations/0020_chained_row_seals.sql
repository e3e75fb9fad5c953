-- migrate:up
-- v4 seals (issue 27 part 6), as SQLite's migration 0020: a seal may hold the columns its
-- transition changed of its chain's task row and the chained row digest over them. PostgreSQL
-- writes v3 seals still (core/log/seals.py: its events are numbered after the decision); it
-- takes v4 seals in a ledger copied from SQLite (`aios-ledger copy`) and verifies them.
-- Written to apply again alike over a ledger that has it (IF [NOT] EXISTS).
ALTER TABLE event_seals ADD COLUMN IF NOT EXISTS row_changes text;
ALTER TABLE event_seals ADD COLUMN IF NOT EXISTS chained_row_digest text;
ALTER TABLE event_seals DROP CONSTRAINT IF EXISTS event_seals_seal_version_check;
ALTER TABLE event_seals ADD CONSTRAINT event_seals_seal_version_check
  CHECK (seal_version = ANY (ARRAY[1, 2, 3, 4]));
ALTER TABLE event_seals DROP CONSTRAINT IF EXISTS event_seals_chained_row_check;
ALTER TABLE event_seals ADD CONSTRAINT event_seals_chained_row_check
  CHECK (seal_version = 4 OR (row_changes IS NULL AND chained_row_digest IS NULL));

-- migrate:down
-- A ledger that holds v4 seals cannot go back: the constraint below refuses them.
ALTER TABLE event_seals DROP CONSTRAINT event_seals_chained_row_check;
ALTER TABLE event_seals DROP CONSTRAINT event_seals_seal_version_check;
ALTER TABLE event_seals ADD CONSTRAINT event_seals_seal_version_check
  CHECK (seal_version = ANY (ARRAY[1, 2, 3]));
ALTER TABLE event_seals DROP COLUMN chained_row_digest;
ALTER TABLE event_seals DROP COLUMN row_changes;
