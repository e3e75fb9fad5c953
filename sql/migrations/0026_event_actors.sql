-- migrate:up
-- Who caused each event: the principal that made the request (a token's name and roles over
-- HTTP and MCP, the identity the command line or library was given, or the ledger itself),
-- as canonical JSON. The event's seal covers it whenever it is set; events written before this
-- column existed keep NULL, read as "unknown", and their seals verify as they were written.
ALTER TABLE events ADD COLUMN actor TEXT;

-- migrate:down
-- A ledger whose events name their actors cannot go back: their seals cover the actor, and the
-- older schema has no place for it (events are append-only, nothing is rewritten). The insert
-- below fails its CHECK on such a ledger, and the whole step rolls back.
CREATE TEMP TABLE events_name_no_actor(
  named INTEGER NOT NULL CONSTRAINT events_name_their_actors_and_cannot_go_back CHECK (named = 0)
);
INSERT INTO events_name_no_actor(named) SELECT count(*) FROM events WHERE actor IS NOT NULL;
DROP TABLE events_name_no_actor;
ALTER TABLE events DROP COLUMN actor;
