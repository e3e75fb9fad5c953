-- migrate:up
-- Who caused each event: the principal that made the request (a token's name and roles over
-- HTTP and MCP, the identity the command line or library was given, or the ledger itself),
-- as canonical JSON. The event's seal covers it whenever it is set; events written before this
-- column existed keep NULL, read as "unknown", and their seals verify as they were written.
ALTER TABLE events ADD COLUMN actor text;

-- migrate:down
-- A ledger whose events name their actors cannot go back: their seals cover the actor, and the
-- older schema has no place for it (events are append-only, nothing is rewritten).
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM events WHERE actor IS NOT NULL) THEN
    RAISE EXCEPTION 'this ledger holds events that name their actors (migration 0026): it cannot go back';
  END IF;
END;
$$;
ALTER TABLE events DROP COLUMN actor;
