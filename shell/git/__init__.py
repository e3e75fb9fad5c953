"""Governed writes to git: git as a subprocess (`runner`), governed repositories (`repos`),
agents' workspaces (`workspace`), proposals (`proposals`) and the governed write (`writes`)."""
