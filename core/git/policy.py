"""What may be written where: protected refs, and the governance facts of a proposal, computed from
what the shell read from git and matched with `fnmatch`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase

from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue

HEADS = "refs/heads/"
# Protected by default, beside the repository's own HEAD branch.
DEFAULT_PROTECTED = ("main", "master", "release/*")
# The branches whose write is a write to the mainline (`direct_main_write`).
MAINLINE = ("main", "master")
# The facts the ledger computes from a proposal, in the names results state them by.
FACT_FLAGS = ("direct_main_write", "force_push", "protected_ref_bypass", "secret_material_exposed")


def zero_oid(like: str) -> str:
    """git's "no object" id of the same hash kind as `like` (40 or 64 hex)."""
    return "0" * len(like)


def branch_ref(branch: str) -> str:
    return branch if branch.startswith(HEADS) else HEADS + branch


def branch_of(ref: str) -> str | None:
    return ref[len(HEADS) :] if ref.startswith(HEADS) else None


def protected_patterns(
    head_branch: str | None, requested: Sequence[str] | None, *, default_protection: bool = True
) -> list[str]:
    """HEAD's branch always (never an agent's), the defaults unless off, then those asked."""
    head = [head_branch] if head_branch else []
    defaults = DEFAULT_PROTECTED if default_protection else ()
    return list(dict.fromkeys([*head, *defaults, *(requested or [])]))  # each once, in order


def is_protected(ref: str, patterns: Iterable[str]) -> bool:
    """Whether a ref matches a protected pattern of branches or full refs."""
    branch = branch_of(ref)
    names = (ref,) if branch is None else (ref, branch)
    return any(fnmatchcase(name, pattern) for pattern in patterns for name in names)


def proposal_facts(
    *,
    refs: Sequence[str],
    target_ref: str,
    descends_from_base: bool,
    secrets: Sequence[Mapping[str, JsonValue]],
    secrets_baseline_sha256: str | None,
    protected: Sequence[str],
    head_branch: str | None,
) -> JsonObject:
    """A proposal's governance facts, with the baseline's sha256 it was judged by."""
    touched = [ref for ref in refs if ref != "HEAD"]
    protected_touched = sorted(
        ref for ref in {*touched, target_ref} if is_protected(ref, protected)
    )
    mainline = {*(branch_ref(name) for name in MAINLINE)}
    if head_branch:
        mainline.add(branch_ref(head_branch))
    return {
        "direct_main_write": any(ref in mainline for ref in {*touched, target_ref}),
        "force_push": not descends_from_base,
        "protected_ref_bypass": bool(protected_touched),
        "protected_refs": list[JsonValue](protected_touched),
        "secret_material_exposed": bool(secrets),
        "secrets": [dict(found) for found in secrets],
        "secrets_baseline_sha256": secrets_baseline_sha256,
        "production_write": False,
    }


def refuse_by_facts(facts: Mapping[str, JsonValue]) -> None:
    """The refusals a proposal's facts alone decide, in a fixed order."""
    if facts.get("protected_ref_bypass") or facts.get("direct_main_write"):
        raise LedgerError(
            "PROTECTED_REF", f"the proposal touches protected refs {facts.get('protected_refs')}"
        )
    if facts.get("force_push"):
        raise LedgerError(
            "NOT_A_DESCENDANT",
            "the proposal does not descend from the binding's base (a force push)",
        )
    if facts.get("secret_material_exposed"):
        secrets = facts.get("secrets")
        listed = secrets if isinstance(secrets, list) else []
        where = sorted({str(found.get("path")) for found in listed if isinstance(found, dict)})
        raise LedgerError("SECRET_MATERIAL", f"secret material in {where}")


def require_agreement(
    result: Mapping[str, JsonValue],
    facts: Mapping[str, JsonValue] | None,
    changed_files: Sequence[str],
    head_oid: str,
) -> None:
    """`RESULT_GOVERNANCE_VIOLATION` unless a result states its proposal's facts, files and head
    as computed; without `facts` only its files and head (its flags are judged at the write)."""
    wrong = [
        flag
        for flag in FACT_FLAGS
        if facts is not None and flag in result and bool(result[flag]) != bool(facts.get(flag))
    ]
    stated = result.get("changed_files")
    if "changed_files" in result and (
        not isinstance(stated, list)
        or sorted(str(name) for name in stated) != sorted(changed_files)
    ):
        wrong.append("changed_files")
    if result.get("head_oid") is not None and result.get("head_oid") != head_oid:
        wrong.append("head_oid")
    if wrong:
        proposal = "the attempt's proposal" if facts is None else "the proposal"
        raise LedgerError(
            "RESULT_GOVERNANCE_VIOLATION",
            f"the result states {wrong} otherwise than {proposal} shows",
        )
