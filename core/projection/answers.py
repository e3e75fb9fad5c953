"""What the projection and binding decisions answer (`TypedDict`s: checked shapes for mypy,
plain dicts at run time)."""

from __future__ import annotations

from typing import TypedDict


class ProjectionAnswer(TypedDict):
    """The task after the projection, and what was projected onto it."""

    task_id: str
    job_id: str
    status: str
    revision: int
    attempt: int
    execution_digest: str
    action: str
    adapter: str
    required_capabilities: list[str]
    recovery_from_source_capture: bool
    idempotent: bool


class BindingAnswer(TypedDict):
    task_id: str
    job_id: str
    binding_sha256: str
    idempotent: bool
