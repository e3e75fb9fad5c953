"""API access: tokens, roles and what each role may do (pure)."""
