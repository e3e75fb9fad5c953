"""Migrations `NNNN_description.sql` with `-- migrate:up` / `-- migrate:down` sections (dbmate)."""
