"""The governed write (`writes`): a verified task's proposal written to its branch under a
writer lease, with git's own compare-and-swap, then attested (`shell/attest`); and its commands
(`cli`). Below it, git itself: repositories, workspaces and proposals (`shell/git`)."""
