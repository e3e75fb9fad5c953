"""What `--help` tells a new user: the commands by group, and examples at the end of each.

`EXAMPLES` holds the examples by command (`""` is `aios-ledger` itself); `tests/test_cli_help.py`
parses every one and fails a command registered without any.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Generator, Iterable, Mapping, Sequence

import attrs
from aios_ledger.shell.cli_support import HelpFormatter

Example = tuple[str, str]  # (the command line, what it does)
WIDTH = 79

EXAMPLES: Mapping[str, tuple[Example, ...]] = {
    "": (
        ("aios-ledger init", "create ./aios-ledger.db"),
        ("aios-ledger task create --json examples/task.json", "enqueue a task"),
        ("aios-ledger task list", "see the tasks"),
        ("aios-ledger status", "counts, leases about to expire, last events"),
    ),
    # -- start here
    "init": (
        ("aios-ledger init", "create ./aios-ledger.db (or migrate it if it exists)"),
        ("aios-ledger --db /srv/ledger/tasks.db init", "create a ledger elsewhere"),
        (
            "aios-ledger --db postgresql://ledger@127.0.0.1/ledger init",
            "migrate a PostgreSQL database into a ledger",
        ),
    ),
    "status": (
        ("aios-ledger status", "a summary table on a terminal"),
        ("aios-ledger status --json", "the same as JSON"),
    ),
    "schema": (
        ("aios-ledger schema", "the names of every request file and result contract"),
        ("aios-ledger schema task", "the JSON Schema of a `task create --json` file"),
        ("aios-ledger schema result-agent-runtime", "what an agent_runtime task's result holds"),
    ),
    "completion": (
        ('eval "$(aios-ledger completion bash)"', "tab completion in this bash session"),
        ("aios-ledger completion zsh > ~/.zfunc/_aios-ledger", "for zsh, once"),
        (
            "aios-ledger completion fish > ~/.config/fish/completions/aios-ledger.fish",
            "for fish, once",
        ),
    ),
    # -- tasks
    "task": (
        ("aios-ledger task create --json examples/task.json", "enqueue a task"),
        ("aios-ledger task list --status QUEUED", "the queue, in claim order"),
    ),
    "task create": (
        ("aios-ledger task create --json examples/task.json", "enqueue the task in the file"),
        ("cat tasks.json | aios-ledger task create --json -", "a list of them, from stdin"),
        (
            "aios-ledger task create --json examples/task.json --wall-seconds 600 "
            "--max-cost 2500000:EUR",
            "with a budget: 10 minutes of wall time, EUR 2.50",
        ),
        (
            "aios-ledger task create --json examples/task.json --governed",
            "no worker may claim it until `project` lands",
        ),
    ),
    "task list": (
        ("aios-ledger task list", "every task, oldest first (a table on a terminal)"),
        ("aios-ledger task list --status QUEUED --limit 10", "the next ten to be claimed"),
        ("aios-ledger task list --agent worker-1", "every task worker-1 held, newest first"),
        ("aios-ledger task list --watch", "re-drawn every 2 seconds until Ctrl-C"),
        ("aios-ledger task list --watch 5 | jq length", "a JSON array each time it changes"),
    ),
    "task show": (("aios-ledger task show notes-1", "one task, every field"),),
    "task history": (("aios-ledger task history notes-1", "who did what to the task, and why"),),
    "task verify": (
        ("aios-ledger task verify --json verify.json", "accept or reject a submitted result"),
    ),
    "task retry": (("aios-ledger task retry --json retry.json", "queue a FAILED task again"),),
    "task pause": (
        (
            "aios-ledger task pause notes-1 --reason 'wait for the freeze' "
            "--idempotency-key pause-notes-1",
            "hold a queued task out of every claim",
        ),
    ),
    "task resume": (
        (
            "aios-ledger task resume notes-1 --reason 'freeze over' "
            "--idempotency-key resume-notes-1",
            "let it be claimed again",
        ),
    ),
    "claim": (
        (
            'echo \'{"agent_id": "w1", "capabilities": ["python"], "lease_seconds": 60}\''
            " | aios-ledger claim --json -",
            "claim the next task a python agent may take",
        ),
        ("aios-ledger claim --json claim.json --limit 5", "claim up to five at once"),
    ),
    "heartbeat": (("aios-ledger heartbeat --json heartbeat.json", "keep a lease alive"),),
    "release": (("aios-ledger release --json release.json", "give a task back to the queue"),),
    "submit": (("aios-ledger submit --json submit.json", "hand in a claimed task's result"),),
    "cancel": (("aios-ledger cancel --json cancel.json", "cancel a task not yet finished"),),
    "expire-leases": (("aios-ledger expire-leases", "requeue tasks whose worker went silent"),),
    "events": (
        ("aios-ledger events notes-1", "a task's events in order"),
        ("aios-ledger events --follow", "every new event as it is sealed, until Ctrl-C"),
        ("aios-ledger events notes-1 --follow --after 0", "a task's events so far, then new ones"),
        (
            "aios-ledger events --follow --api http://127.0.0.1:18892 --token-file me.token",
            "the same from a server's event stream, resumed after a dropped connection",
        ),
    ),
    # -- workers and reviews
    "worker": (
        (
            "aios-ledger worker --agent-id w1 --capability python "
            "--exec 'python3 examples/agent.py' --until-empty",
            "run the example agent on every python task, then stop",
        ),
        ("aios-ledger --config aios-ledger.toml worker", "the settings of [worker] in a file"),
    ),
    "review": (
        (
            "aios-ledger review --as reviewer-1 --exec 'python3 examples/reviewer.py'",
            "judge every submitted task with the example reviewer, as reviewer-1",
        ),
    ),
    "mcp": (
        (
            "aios-ledger mcp --api http://127.0.0.1:18892 --token-file agent.token",
            "an agent's tools on stdin/stdout (an MCP host starts this)",
        ),
        (
            "aios-ledger mcp --api http://127.0.0.1:18892 --transport http"
            " --listen 127.0.0.1:18893",
            "Streamable HTTP at /mcp; each client brings its own token",
        ),
    ),
    "run": (("aios-ledger run create session-1 'fix the build'", "record a new run"),),
    "run create": (
        ("aios-ledger run create session-1 'fix the build'", "a run with a new random id"),
        ("aios-ledger run create session-1 'fix the build' --run-id r1", "a run of a known id"),
    ),
    "run append": (
        ("aios-ledger run append r1 tool_call --payload call.json", "append an event to run r1"),
    ),
    "run evidence": (
        ("aios-ledger run evidence session-1 r1 --max-events 50", "what a reviewer would read"),
    ),
    "aux": (("aios-ledger aux list --state FAILED", "reviews that failed"),),
    "aux list": (
        ("aios-ledger aux list", "every auxiliary run, oldest first"),
        ("aios-ledger aux list --run r1 --json", "the reviews of run r1, as JSON"),
    ),
    "aux show": (("aios-ledger aux show aux-1", "one auxiliary run with its events"),),
    "binding": (("aios-ledger binding put binding.json", "register a governed binding"),),
    "binding put": (
        ("aios-ledger binding put binding.json", "register the binding in the file"),
        ("aios-ledger schema binding", "what the file holds"),
    ),
    "project": (
        (
            "aios-ledger project widgets-notes --pin --adapter example",
            "show what it authorizes, ask on a terminal, project exactly that",
        ),
        (
            "aios-ledger project widgets-notes --pin --adapter example --preview --json",
            "the pinned request, writing nothing (a request file for automation)",
        ),
        ("aios-ledger project widgets-notes --request projection.json", "project a request file"),
    ),
    # -- governed writes
    "repo": (("aios-ledger repo list", "the governed repositories"),),
    "repo add": (
        ("aios-ledger repo add acme/widgets /srv/git/widgets.git", "govern a bare repository"),
        (
            "aios-ledger repo add acme/widgets /srv/git/widgets.git --protected 'release/*'",
            "with its own protected branches",
        ),
        (
            "aios-ledger repo add acme/widgets /srv/git/widgets.git"
            " --secrets-baseline .secrets.baseline --scan-max-seconds 60",
            "with its scanner's baseline and budget, sealed in the ledger",
        ),
        (
            "aios-ledger repo add acme/widgets git@git.example.com:acme/widgets.git"
            " --ssh-key /etc/aios-ledger/deploy-key --known-hosts /etc/aios-ledger/known_hosts",
            "govern a repository on a git server through the ledger's mirror, with its deploy key",
        ),
        (
            "aios-ledger repo add acme/widgets https://forge.example.com/acme/widgets.git"
            " --token-file /etc/aios-ledger/forge-token",
            "over HTTPS, with a token read from its file",
        ),
    ),
    "repo settings": (
        (
            "aios-ledger repo settings acme/widgets --idempotency-key raise-1"
            " --scan-max-bytes 134217728",
            "raise one proposal's scan budget",
        ),
        (
            "aios-ledger repo settings acme/widgets --idempotency-key agents-1"
            " --agent-scan-max-seconds 300 --agent-scan-window 3600",
            "each agent's scanning per hour",
        ),
        (
            "aios-ledger repo settings acme/widgets --idempotency-key prs-on"
            " --pull-requests github",
            "propose every landed write as a pull request",
        ),
    ),
    "repo list": (("aios-ledger repo list", "every governed repository"),),
    "repo show": (("aios-ledger repo show acme/widgets", "one governed repository"),),
    "propose": (("aios-ledger propose --json proposal.json", "record a bundle as the proposal"),),
    "proposals": (("aios-ledger proposals widgets-notes", "a task's proposals and their facts"),),
    "write": (("aios-ledger write widgets-notes --json write.json", "write the verified work"),),
    "write-recover": (("aios-ledger write-recover", "settle writes a crash left in doubt"),),
    "why": (
        ("aios-ledger why 0406c5db", "the task, agent, review and attestation of a commit"),
        ("aios-ledger why 0406c5db --json", "the whole document: events, seals, proofs, note"),
    ),
    "verify-attestation": (
        (
            "aios-ledger verify-attestation 0406c5db --repo gadgets.git --key ledger.pub",
            "check a commit's signed attestation from the repository alone",
        ),
    ),
    # -- the log
    "verify": (
        ("aios-ledger verify", "walk the whole log (exit 0 only when intact)"),
        ("aios-ledger verify --head head.json", "also detect events removed since head.json"),
        ("aios-ledger verify --log-key VKEY", "and each stored checkpoint's signature"),
        ("aios-ledger verify --witness-key WVKEY", "and each stored cosignature by that witness"),
    ),
    "head": (("aios-ledger head > head.json", "keep the head to check against later"),),
    "prove": (
        ("aios-ledger prove 42 > proof.json", "event 42's inclusion in the Merkle log now"),
        ("aios-ledger prove --consistency 100 250", "the tree of 250 extends the tree of 100"),
        ("aios-ledger prove 42 --wait --timeout 5", "wait for event 42 to be in the tree"),
    ),
    "integrate": (
        ("aios-ledger integrate", "append what committed to the Merkle log (PostgreSQL)"),
        ("aios-ledger integrate --follow", "keep integrating, for a deployment without serve"),
    ),
    "verify-proof": (
        ("aios-ledger verify-proof proof.json --root HEX", "check a proof offline"),
        (
            "aios-ledger verify-proof proof.json --checkpoint cp.txt --log-key VKEY",
            "against a signed checkpoint, with the public key alone",
        ),
    ),
    "export": (
        ("aios-ledger export --all --output log.jsonl", "every event with its seal"),
        ("aios-ledger export --task notes-1", "one task's events, on stdout"),
    ),
    "verify-export": (("aios-ledger verify-export log.jsonl", "check an export offline"),),
    "archive": (
        (
            "aios-ledger archive --finished-before 2025-01-01T00:00:00Z "
            "--output 2024.archive --dry-run",
            "what would be archived",
        ),
        (
            "aios-ledger archive --finished-before 2025-01-01T00:00:00Z --output 2024.archive",
            "archive it",
        ),
    ),
    "archive show": (
        ("aios-ledger archive show 2024.archive", "every archived task, as a listing"),
        ("aios-ledger archive show 2024.archive notes-1 --json", "one task, as JSON"),
    ),
    "archive restore": (
        ("aios-ledger archive restore 2024.archive", "put its tasks back"),
        (
            "aios-ledger archive restore 2024.archive --idempotency-key restore-2024",
            "the same, safe to retry",
        ),
    ),
    "verify-archive": (("aios-ledger verify-archive 2024.archive", "check an archive file"),),
    # -- signed checkpoints
    "key": (
        (
            "aios-ledger key generate --name ledger.example.com/main --out checkpoint.key",
            "a checkpoint key; its verifier key is printed",
        ),
    ),
    "key generate": (
        (
            "aios-ledger key generate --name ledger.example.com/main --out checkpoint.key",
            "the ledger's key, named as its origin",
        ),
        (
            "aios-ledger key generate --name witness.example.com/w1 --out witness.key",
            "a witness's key",
        ),
    ),
    "checkpoint": (
        ("aios-ledger checkpoint --key checkpoint.key", "sign the tree head and print the note"),
        ("aios-ledger checkpoint --json", "with [checkpoint] key, the stored row as JSON"),
    ),
    "verify-checkpoint": (
        (
            "aios-ledger verify-checkpoint checkpoint.txt --log-key VKEY",
            "the checkpoint's size and root, if the log signed it",
        ),
        (
            "aios-ledger verify-checkpoint checkpoint.txt --log-key VKEY --witness-key WVKEY",
            "and a witness cosigned it",
        ),
    ),
    "witness": (
        (
            "aios-ledger witness --log http://127.0.0.1:18892 --log-key VKEY --key witness.key "
            "--state witness-state --once",
            "one round: check, cosign, send",
        ),
        (
            "aios-ledger witness --listen 0.0.0.0:7380 --log-key VKEY --key witness.key "
            "--state witness-state",
            "a C2SP tlog-witness: logs push to POST /add-checkpoint",
        ),
    ),
    # -- the server
    "serve": (
        ("aios-ledger serve", "the API on 127.0.0.1:18892"),
        ("aios-ledger serve --listen 0.0.0.0:9000", "on every interface, port 9000"),
        (
            "aios-ledger serve --checkpoint-key ledger.key --checkpoint-every-seconds 60 "
            "--witness-url http://witness.example:7380 --witness-key WVKEY",
            "sign a checkpoint a minute, pushed to a witness",
        ),
    ),
    "token": (("aios-ledger token issue w1 --role agent", "a token for agent w1"),),
    "token issue": (
        ("aios-ledger token issue w1 --role agent", "a token for agent w1 (printed once: keep it)"),
        ("aios-ledger token issue alice --role reviewer --role auditor", "two roles"),
        (
            "aios-ledger token issue w2 --role agent --capability python --capability gpu",
            "agent w2 may claim offering python and gpu (or fewer), nothing else",
        ),
    ),
    "token list": (("aios-ledger token list", "names, roles, granted capabilities and status"),),
    "token revoke": (("aios-ledger token revoke w1", "refuse w1's token from now on"),),
    # -- the database
    "migrate": (
        ("aios-ledger migrate --status", "the migrations applied and pending"),
        ("aios-ledger migrate", "apply the pending ones"),
    ),
    "upgrade": (
        ("aios-ledger --db ledger.db upgrade", "a 0.x ledger (at its migration 0028) made 1.0"),
    ),
    "schema-dump": (("aios-ledger schema-dump > schema.sql", "the schema after all migrations"),),
    "copy": (
        (
            "aios-ledger copy --from aios-ledger.db --to postgresql://ledger@127.0.0.1/ledger",
            "move a SQLite ledger onto PostgreSQL",
        ),
    ),
}


@attrs.frozen
class CommandGroup:
    """Commands a person uses for one kind of work, as `aios-ledger --help` lists them."""

    title: str
    purpose: str
    commands: tuple[str, ...]


class CommandListFormatter(HelpFormatter):
    """Drops argparse's flat list of every command: the epilog gives them by group."""

    def _iter_indented_subactions(
        self, action: argparse.Action
    ) -> Generator[argparse.Action, None, None]:
        if not isinstance(action, argparse._SubParsersAction):
            yield from super()._iter_indented_subactions(action)


def examples_text(examples: Sequence[Example]) -> str:
    lines = ["examples:"]
    for command, purpose in examples:
        lines.append(f"  {command}")
        lines.extend(
            textwrap.wrap(purpose, WIDTH, initial_indent=" " * 6, subsequent_indent=" " * 6)
        )
    return "\n".join(lines)


def commands_text(groups: Iterable[CommandGroup], helps: Mapping[str, str]) -> str:
    """Each group's title and purpose, then its commands with their one-line help."""
    name_width = max(len(name) for name in helps) + 2
    indent = " " * (4 + name_width)
    lines = ["commands, by what you are doing (`aios-ledger COMMAND --help` for each):"]
    for group in groups:
        heading = f"{group.title}: {group.purpose}"
        lines += ["", *textwrap.wrap(heading, WIDTH, initial_indent="  ", subsequent_indent="    ")]
        for name in group.commands:
            lines += textwrap.wrap(
                helps[name],
                WIDTH,
                initial_indent=f"    {name:<{name_width}}",
                subsequent_indent=indent,
            )
    return "\n".join(lines)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """A parser's commands by name: each one's parser and its one-line help."""
    found: dict[str, tuple[argparse.ArgumentParser, str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, child in action.choices.items():
                found[name] = (child, helps.get(name, ""))
    return found


def attach_help(parser: argparse.ArgumentParser, groups: Sequence[CommandGroup]) -> None:
    """The top-level epilog, and under every command its help as its description and its
    examples as its epilog."""
    commands = subcommands(parser)
    parser.formatter_class = CommandListFormatter
    listing = commands_text(groups, {name: help for name, (_, help) in commands.items()})
    parser.epilog = f"{listing}\n\n{examples_text(EXAMPLES[''])}"
    for name, (child, help) in commands.items():
        _attach_examples(child, name, help)


def _attach_examples(parser: argparse.ArgumentParser, path: str, help: str) -> None:
    if parser.description is None:
        parser.description = help
    examples = EXAMPLES.get(path, ())
    parser.epilog = examples_text(examples) if examples else None
    for name, (child, child_help) in subcommands(parser).items():
        _attach_examples(child, f"{path} {name}", child_help)
