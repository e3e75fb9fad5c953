"""The sealed log in the database: reading its tail, sealing adopted events, verifying and
exporting it."""
