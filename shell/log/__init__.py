"""The sealed log in the database: verifying, exporting, archiving, copying and following it."""
