"""Signed checkpoints in the shell: keys, signing, the stored checkpoints and the witness."""
