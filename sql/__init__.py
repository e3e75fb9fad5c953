"""Named SQL statements (`-- name: ...` blocks) and dbmate-compatible migrations."""
