-- migrate:up
-- Writers of different tasks no longer wait for one another (issue 20). Until now every write
-- took one ledger lock, because the seals covered each event's global id and the ledger handed
-- ids out densely from a counter row that each transaction updated at its COMMIT. From here on:
-- * a task's own transitions run under its row lock (FOR UPDATE, claims FOR UPDATE SKIP
--   LOCKED) and a shared ledger lock; everything else keeps the exclusive one;
-- * events appended on PostgreSQL are sealed v3: over their content and their place in their
--   chain, not their global id, which the store draws from a sequence after the decision. Ids
--   stay unique, never reused (archived ids included) and rising along each chain; they are no
--   longer dense nor in commit order, and the verifier does not read a gap as a removed event
--   here (UNIQUE (chain, chain_seq) and the seals' chains still catch a removed or forked one).
-- * a task's creation order (`seq`) is drawn from a sequence too.
ALTER TABLE event_seals DROP CONSTRAINT event_seals_seal_version_check;
ALTER TABLE event_seals ADD CONSTRAINT event_seals_seal_version_check
  CHECK (seal_version IN (1, 2, 3));

DROP TRIGGER events_count_id ON events;
DROP FUNCTION events_count_id();

CREATE SEQUENCE event_ids AS bigint MINVALUE 1;
SELECT setval('event_ids',
              greatest(c.last_event_id, coalesce((SELECT max(event_id) FROM events), 0)) + 1,
              false)
FROM event_id_counter AS c;
DROP TABLE event_id_counter;

CREATE SEQUENCE task_seqs AS bigint MINVALUE 1;
SELECT setval('task_seqs', coalesce((SELECT max(seq) FROM tasks), 0) + 1, false);

-- Whether a claimer offering `offered_json` (a JSON list of names) has every capability a task
-- requires, so that the claim's SKIP LOCKED batch locks only tasks this claimer may take (the
-- core checks again). A list that is not one (a tampered row) is never offered: the core
-- refuses it too, and one bad row must not fail every claim.
CREATE FUNCTION capabilities_offered(required_json text, offered_json text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN NOT EXISTS (
    SELECT 1 FROM jsonb_array_elements_text(required_json::jsonb) AS required(name)
    WHERE NOT offered_json::jsonb ? required.name
  );
EXCEPTION WHEN others THEN
  RETURN false;
END;
$$;

-- migrate:down
-- Back to dense ids under one lock, for a ledger that holds no v3 seal: a v3 seal does not cover
-- its event's id, and 0010 has no way to verify one, so such a ledger refuses to go back.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM event_seals WHERE seal_version = 3) THEN
    RAISE EXCEPTION 'this ledger holds events sealed v3 (migration 0011): it cannot go back';
  END IF;
END;
$$;
CREATE TABLE event_id_counter(
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  last_event_id bigint NOT NULL CHECK (last_event_id >= 0)
);
INSERT INTO event_id_counter(only_row, last_event_id)
SELECT true, greatest(CASE WHEN is_called THEN last_value ELSE last_value - 1 END,
                      coalesce((SELECT max(event_id) FROM events), 0))
FROM event_ids;
DROP SEQUENCE event_ids;
DROP SEQUENCE task_seqs;
DROP FUNCTION capabilities_offered(text, text);
CREATE FUNCTION events_count_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE event_id_counter SET last_event_id = (SELECT max(event_id) FROM events)
  WHERE last_event_id < NEW.event_id;
  RETURN NULL;
END;
$$;
CREATE CONSTRAINT TRIGGER events_count_id AFTER INSERT ON events
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION events_count_id();
ALTER TABLE event_seals DROP CONSTRAINT event_seals_seal_version_check;
ALTER TABLE event_seals ADD CONSTRAINT event_seals_seal_version_check
  CHECK (seal_version IN (1, 2));
