"""Reliability through the API: 32 clients doing lifecycles through `aios-ledger serve` (group
commit on) while the server is SIGKILLed and restarted several times. Every acknowledged write
is in the file, none twice, nothing unexpected, no two holders at once: the contention test's
history checker (`reliability_history`) over the clients' HTTP histories.

A heartbeat whose answer was lost in a kill is sent again (the client retries it: it is
idempotent in effect), which may leave a second `TASK_HEARTBEAT` next to the acknowledged one;
those are counted (`retried_heartbeats`), not anomalies. Any other unacknowledged event is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aios_ledger.shell import Database
from aios_ledger.shell.api.tokens import issue_token
from api_server import ServeProcess
from reliability_checks import contents_anomalies, read_contents
from reliability_figures import record_figures
from reliability_history import check_history, read_histories

SOAK = os.environ.get("AIOS_SOAK") == "1"
CLIENTS = 32
SECONDS = 60 if SOAK else 9
KILLS = 8 if SOAK else 3
CLIENT = Path(__file__).with_name("reliability_api_client.py")


def _retried_heartbeat(text: str) -> bool:
    return " TASK_HEARTBEAT at " in text and text.endswith("never answered")


def _token_issued(text: str) -> bool:
    """The test's own ledger-level events: the clients' tokens, issued before they start."""
    return text.startswith("None API_TOKEN_ISSUED at ")


def _client_command(url: str, token: Path, history: Path, n: int) -> list[str]:
    seed = 500 + n
    arguments = (url, token, history, n, SECONDS, seed)
    return [sys.executable, str(CLIENT), *map(str, arguments)]


@pytest.mark.slow
def test_acknowledged_writes_survive_server_kills(tmp_path: Path) -> None:
    db = tmp_path / "api.sqlite3"
    server = ServeProcess(db)
    histories = [tmp_path / f"history-{n}.jsonl" for n in range(CLIENTS)]
    with Database(db) as opened:
        for n in range(CLIENTS):
            token = issue_token(opened, f"agent-{n}", ["agent", "owner", "reviewer"])["token"]
            (tmp_path / f"token-{n}").write_text(token + "\n")
    clients = [
        subprocess.Popen(
            _client_command(server.url, tmp_path / f"token-{n}", path, n),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, path in enumerate(histories)
    ]
    kills = 0
    try:
        interval = SECONDS / (KILLS + 1)
        for _ in range(KILLS):
            time.sleep(interval)
            server.kill()
            kills += 1
            server.start()
        for client in clients:
            _, errors = client.communicate(timeout=SECONDS + 300)
            assert client.returncode == 0, errors[-3000:]
    finally:
        for client in clients:
            if client.poll() is None:
                client.kill()
        server.stop()

    contents = read_contents(db)
    assert contents_anomalies(contents) == []
    outcome = check_history(contents, read_histories(histories))
    figures = outcome["figures"]
    retried = [text for text in outcome["unexpected"] if _retried_heartbeat(text)]
    assert outcome["lost"] == []
    assert outcome["duplicated"] == []
    tokens = [text for text in outcome["unexpected"] if _token_issued(text)]
    assert len(tokens) == CLIENTS
    others = set(outcome["unexpected"]) - set(retried) - set(tokens)
    assert others == set()
    assert outcome["lease_overlaps"] == []
    assert figures["indeterminate"] == 0
    assert figures["processes"] == CLIENTS and kills == KILLS
    assert figures["acknowledged"] > 0 and figures["claims"] > 0
    record_figures(
        "api-kills",
        {**figures, "seconds": SECONDS, "kills": kills, "retried_heartbeats": len(retried)},
    )
