"""The keyset-paged task list of `GET /v1/tasks` and the console: each page after the last `seq`,
never at an OFFSET, its cursor signed and bound to its filters."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Annotated

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.kinds import Between, Identifier, Text, TimestampText
from aios_ledger.core.structuring import structure
from aios_ledger.core.tasks.queries import DEFAULT_LIST, MAX_LIST
from aios_ledger.core.tasks.transitions import TaskStatus

# As many as `GET /v1/tasks` answered before it was paged (core/tasks/queries.py).
MAX_PAGE = MAX_LIST
DEFAULT_PAGE = DEFAULT_LIST
MAX_SEARCH = 200
# The cursor's text: `v1.<seq>.<signature>` base64url-encoded, well under this.
MAX_CURSOR = 200
CURSOR_VERSION = "v1"

SearchText = Annotated[str, Text(max_length=MAX_SEARCH)]


@attrs.frozen
class TaskFilters:
    """What a page is filtered by; time bounds normalised so that text order is time order."""

    status: TaskStatus | None = None
    agent: Identifier | None = None
    capability: Identifier | None = None
    repository: Identifier | None = None
    created_from: TimestampText | None = None
    created_to: TimestampText | None = None
    updated_from: TimestampText | None = None
    updated_to: TimestampText | None = None
    search: SearchText | None = None

    def params(self) -> dict[str, str | None]:
        """The list statement's filter parameters (the search lower-cased once, here)."""
        values: dict[str, str | None] = {
            name: None if value is None else str(value)
            for name, value in attrs.asdict(self).items()
        }
        values["search_lower"] = None if self.search is None else self.search.lower()
        return values

    def fingerprint(self) -> str:
        """The filters as one canonical text, which a cursor is bound to."""
        return json.dumps(attrs.asdict(self), sort_keys=True, separators=(",", ":"))


@attrs.frozen
class PageBounds:
    """A page's size (1 to MAX_PAGE) and the cursor the previous page gave (None: the first)."""

    limit: Annotated[int, Between(1, MAX_PAGE)] = DEFAULT_PAGE
    cursor: Annotated[str, Text(max_length=MAX_CURSOR)] | None = None


@attrs.frozen
class TaskPageRequest:
    filters: TaskFilters
    limit: int = DEFAULT_PAGE
    cursor: str | None = None

    @classmethod
    def from_mapping(cls, raw: object) -> TaskPageRequest:
        """From one flat mapping, as a query string has it; anything wrong is `FIELDS_INVALID`."""
        if not isinstance(raw, dict):
            raise LedgerError("FIELDS_INVALID", "task page: must be an object")
        paging = {key: raw[key] for key in ("limit", "cursor") if key in raw}
        filters = {key: value for key, value in raw.items() if key not in paging}
        bounds = structure(paging, PageBounds, what="task page")
        return cls(
            structure(filters, TaskFilters, what="task filters"), bounds.limit, bounds.cursor
        )


def _signature(key: bytes, seq: int, filters: TaskFilters) -> str:
    message = f"{CURSOR_VERSION}.{seq}.{filters.fingerprint()}".encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest[:18]).decode()


def encode_cursor(key: bytes, seq: int, filters: TaskFilters) -> str:
    """The cursor of the page after the row of `seq`, under `filters`."""
    text = f"{CURSOR_VERSION}.{seq}.{_signature(key, seq, filters)}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(key: bytes, cursor: str, filters: TaskFilters) -> int:
    """The `seq` a cursor starts after, if this server issued it for these filters."""
    refused = LedgerError(
        "CURSOR_INVALID",
        "cursor: not a cursor this server gave for these filters; start again without it",
    )
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.urlsafe_b64decode(padded.encode("ascii")).decode("ascii")
    except (ValueError, UnicodeError):
        raise refused from None
    version, _, rest = text.partition(".")
    seq_text, _, signature = rest.partition(".")
    if version != CURSOR_VERSION or not seq_text.isdigit() or len(seq_text) > 18:
        raise refused
    seq = int(seq_text)
    if not hmac.compare_digest(signature, _signature(key, seq, filters)):
        raise refused
    return seq


# A status with at most this many tasks is read through its own index and sorted; a larger one
# finds a page soon in creation order, where sorting them all would cost more.
SORTED_STATUS_BOUND = 5_000


# The first page's bound: above every seq a ledger can hold (seq is a 64-bit integer).
FIRST_PAGE_SEQ = 2**62


def page_after(key: bytes, request: TaskPageRequest) -> int:
    """The seq the requested page starts below: the cursor's, or above every task's."""
    if request.cursor is None:
        return FIRST_PAGE_SEQ
    return decode_cursor(key, request.cursor, request.filters)


def next_page_cursor(
    key: bytes, request: TaskPageRequest, seqs: list[int], scanned_to: int | None = None
) -> str | None:
    """The next page's cursor (None at the end), resuming a bounded read."""
    if len(seqs) > request.limit:
        return encode_cursor(key, seqs[request.limit - 1], request.filters)
    return encode_cursor(key, scanned_to, request.filters) if scanned_to is not None else None


# A filter matching at most this many tasks is read through its own index and sorted by seq.
SORTED_FILTER_BOUND = 5_000
# The filters with an index of their own, in the order the shell counts them.
SORTED_FILTERS = ("status", "agent", "repository", "created", "updated")
# A page read in creation order reads at most this many sequence numbers below its cursor, so
# that a rare match costs a bounded read per page; a page it leaves short says so.
SCAN_BOUND = 20_000


def scan_floor(top_seq: int | None, bottom_seq: int | None, bound: int = SCAN_BOUND) -> int | None:
    """The lowest seq a page in creation order reads; None when the bound reaches the first task."""
    if top_seq is None or bottom_seq is None:
        return None
    floor = top_seq - bound + 1
    return floor if floor > bottom_seq else None


def sorted_filter_given(filters: TaskFilters, name: str) -> bool:
    if name == "created":
        return filters.created_from is not None or filters.created_to is not None
    if name == "updated":
        return filters.updated_from is not None or filters.updated_to is not None
    return getattr(filters, name) is not None


def filter_bound(name: str) -> int:
    return SORTED_STATUS_BOUND if name == "status" else SORTED_FILTER_BOUND


def page_statement(request: TaskPageRequest, counted: dict[str, int]) -> str:
    """Through the index of the filter with fewest tasks, else bounded creation order."""
    within = [
        (tasks, SORTED_FILTERS.index(name), name)
        for name, tasks in counted.items()
        if tasks <= filter_bound(name)
    ]
    return f"tasks_page_of_{min(within)[2]}" if within else "tasks_page"
