-- The Merkle log (core/log/merkle.py): leaves in integration order, each row with the hashes of
-- the subtrees its leaf completes, and the tree's head row.

-- name: merkle_tree_cas_update!
UPDATE merkle_tree SET size = :size, frontier = :frontier, revision = revision + 1
WHERE only_row = :only_row AND revision = :expected_revision;

-- name: merkle_tree^
-- returns: MerkleTreeRow
-- The head row as a read sees it (a tree head, a proof's size).
SELECT size, frontier, revision FROM merkle_tree WHERE only_row = 1;

-- name: merkle_leaf_of_event^
SELECT leaf_index, leaf_hash FROM merkle_leaves WHERE event_id = :event_id;

-- name: merkle_leaf_hash^
-- returns: MerkleHashRow
SELECT leaf_hash AS hash FROM merkle_leaves WHERE leaf_index = :node_index;

-- name: merkle_node_hash^
-- returns: MerkleHashRow
-- The subtree (level, node_index), in the row of the leaf that completes it.
SELECT substr(nodes, 32 * CAST(:level AS integer) - 31, 32) AS hash FROM merkle_leaves
WHERE leaf_index = ((CAST(:node_index AS bigint) + 1) << CAST(:level AS integer)) - 1
AND length(nodes) >= 32 * CAST(:level AS integer);

-- name: merkle_events_to_integrate
-- returns: PendingLeaf
-- The next committed (sealed or archived) events above an id that no leaf is of yet; each side
-- reads its primary key from the id up, whatever the tables' statistics say.
SELECT event_id, seal, created_at FROM (
  SELECT s.event_id, s.seal, e.created_at FROM event_seals AS s
  LEFT JOIN events AS e ON e.event_id = s.event_id
  WHERE s.event_id > :after
  AND NOT EXISTS (
    SELECT 1 FROM merkle_leaves AS l WHERE l.event_id = s.event_id AND l.event_id > :after
  )
  ORDER BY s.event_id LIMIT :limit
) AS sealed
UNION ALL
SELECT event_id, seal, created_at FROM (
  SELECT a.event_id, a.seal, CAST(NULL AS text) AS created_at FROM archived_events AS a
  WHERE a.event_id > :after
  AND NOT EXISTS (
    SELECT 1 FROM merkle_leaves AS l WHERE l.event_id = a.event_id AND l.event_id > :after
  )
  ORDER BY a.event_id LIMIT :limit
) AS listed
ORDER BY 1 LIMIT :limit;

-- name: merkle_verify_leaves
-- `verify`: every leaf in order, with the subtrees it completes and its (archived) event's seal.
SELECT l.leaf_index, l.event_id, l.leaf_hash, l.nodes, coalesce(s.seal, a.seal) AS seal
FROM merkle_leaves AS l
LEFT JOIN event_seals AS s ON s.event_id = l.event_id
LEFT JOIN archived_events AS a ON a.event_id = l.event_id
ORDER BY l.leaf_index;

-- name: merkle_events_without_leaf
-- `verify`: sealed or archived events that no leaf is of.
SELECT s.event_id FROM event_seals AS s
WHERE NOT EXISTS (SELECT 1 FROM merkle_leaves AS l WHERE l.event_id = s.event_id)
UNION ALL
SELECT a.event_id FROM archived_events AS a
WHERE NOT EXISTS (SELECT 1 FROM merkle_leaves AS l WHERE l.event_id = a.event_id)
ORDER BY 1 LIMIT 100;

-- name: merkle_event_seal^
-- The seal an event's leaf is of: its own, or the one its archive listing keeps.
SELECT seal FROM event_seals WHERE event_id = :event_id
UNION ALL
SELECT seal FROM archived_events WHERE event_id = :event_id;

-- name: merkle_tree_insert_unbuilt!
-- The head row of a tree not built yet, where a DBA emptied the tables.
INSERT INTO merkle_tree(only_row, size, frontier, revision) VALUES (1, NULL, :frontier, 0)
ON CONFLICT DO NOTHING;
