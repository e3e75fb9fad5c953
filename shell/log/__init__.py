"""The sealed log in the database: verifying, exporting, archiving and copying it, and following
its events. (Its tail, its Merkle tree and the sealing of adopted events are the write path's:
`shell/db`.)"""
