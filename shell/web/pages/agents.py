"""The Agents and tokens page (`/agents`): every API token, who holds which task, each agent's
last heartbeat; never a token or its digest. An agent's own page lists the tasks it held, by
the Tasks page's bounded query."""

from __future__ import annotations

from typing import Any

from aios_ledger.core.api.tokens import ApiTokenView
from aios_ledger.core.tasks.listing import SCAN_BOUND, TaskPageRequest
from aios_ledger.shell.api.app import READERS
from aios_ledger.shell.api.tokens import list_tokens
from aios_ledger.shell.db.connection import fetch_all, fetch_value
from aios_ledger.shell.tasks.listing import read_task_page
from aios_ledger.shell.web.console import Page, Rendered, Visit

SHOWN = 100
# A revoked token stays listed, so the list only grows: it is paged, to keep the page small.
TOKENS_SHOWN = 50
CAPABILITIES_SHOWN = 8
# Heartbeats are looked for among the newest events only, so the page costs the same at any size.
HEARTBEAT_WINDOW = 50_000


def agents_page(visit: Visit) -> Rendered:
    def read(conn: Any) -> dict[str, Any]:
        after = max(0, int(fetch_value(conn, "log_max_event_id")) - HEARTBEAT_WINDOW)
        return {
            "held": fetch_all(conn, "console_tasks_held", {"limit": SHOWN}),
            "heartbeats": fetch_all(
                conn, "console_last_heartbeats", {"after": after, "limit": SHOWN}
            ),
        }

    def read_all(stores: Any) -> dict[str, Any]:
        return {"tokens": list_tokens(stores.db), **stores.db.read(read)}

    found = visit.backend.read_now(read_all)
    tokens, next_after = tokens_after(found.pop("tokens"), visit.query("after"))
    return Rendered(
        "agents.html",
        {
            **found,
            "tokens": tokens,
            "next_after": next_after,
            "paged": visit.query("after") is not None,
            "capabilities_shown": CAPABILITIES_SHOWN,
            "window": HEARTBEAT_WINDOW,
        },
    )


def tokens_after(
    tokens: list[ApiTokenView], after: str | None
) -> tuple[list[ApiTokenView], str | None]:
    """The first TOKENS_SHOWN tokens by name after `after`, and the next page's `after`."""
    following = sorted(
        (token for token in tokens if after is None or token["name"] > after),
        key=lambda token: token["name"],
    )
    shown = following[:TOKENS_SHOWN]
    return shown, shown[-1]["name"] if len(following) > len(shown) else None


AGENT_PAGE_SIZE = 50


def agent_page(visit: Visit) -> Rendered:
    agent, cursor = visit.path("agent_id"), visit.query("cursor")
    mapping: dict[str, object] = {"agent": agent, "limit": AGENT_PAGE_SIZE}
    if cursor is not None:
        mapping["cursor"] = cursor
    request = TaskPageRequest.from_mapping(mapping)
    key = visit.backend.cursor_key
    page = visit.backend.read_now(lambda stores: read_task_page(stores.db, request, key))
    return Rendered(
        "agent.html",
        {
            "agent": agent,
            "tasks": page["tasks"],
            "next_cursor": page["next_cursor"],
            "cursor": cursor,
            # A short page with a next one: its read stopped at the scan bound.
            "bounded": page["next_cursor"] is not None and len(page["tasks"]) < AGENT_PAGE_SIZE,
            "scan_bound": SCAN_BOUND,
        },
    )


PAGES = (
    Page("/agents", "agentsPage", agents_page, READERS, nav="Agents and tokens"),
    Page("/agents/{agent_id:path}", "agentPage", agent_page, READERS),
)
