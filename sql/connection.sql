-- Connection set-up and transaction control. PRAGMAs take no parameters, hence one block each.

-- name: commit!
COMMIT;

-- name: rollback!
ROLLBACK;
