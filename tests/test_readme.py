"""The README is a front door whose commands work as written, and the reference pages it points
to keep what the README used to enforce: every CLI command documented, and only those."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from aios_ledger.shell.cli import build_parser
from readme_snippets import Snippet, marked_snippets, run_snippet

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CLI_PAGE = (ROOT / "docs" / "cli.md").read_text()
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SNIPPETS = [snippet for path in DOCUMENTS for snippet in marked_snippets(path)]


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[snippet.name for snippet in SNIPPETS])
def test_marked_blocks_run_as_written(snippet: Snippet) -> None:
    done = run_snippet(snippet)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_the_readme_marks_its_quick_start_walk_through_and_library_example() -> None:
    marked = [snippet for snippet in SNIPPETS if snippet.source == "README.md"]
    assert [snippet.language for snippet in marked] == ["sh", "sh", "python"]
    assert "aios-ledger task history" in marked[0].code
    assert "write widgets-notes" in marked[1].code
    assert "aios-ledger task history widgets-notes" in marked[1].code  # who did what
    assert "TaskLedger(" in marked[2].code


def test_the_governed_write_has_a_remote_variant_the_readme_points_to() -> None:
    # Run whole by test_marked_blocks_run_as_written: a served repository, governed by URL.
    [remote] = [
        snippet
        for snippet in SNIPPETS
        if snippet.source == "docs/getting-started.md" and "git_http_server.py" in snippet.code
    ]
    assert 'repo add acme/widgets "$url" --token-file' in remote.code
    assert "write widgets-notes" in remote.code
    assert "docs/getting-started.md#the-same-write-through-a-git-server" in README


def test_the_runner_fails_a_failing_block_and_refuses_a_dangling_marker(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- ci: run -->\n```sh\ntest -f examples/agent.py\nfalse\necho never\n```\n")
    (failing,) = marked_snippets(page)
    done = run_snippet(failing)
    assert done.returncode == 1
    assert "never" not in done.stdout
    page.write_text("<!-- ci: run -->\nno block follows\n")
    with pytest.raises(ValueError, match="no block after it"):
        marked_snippets(page)
    page.write_text("<!-- ci: run -->\n```toml\n[database]\n```\n")
    with pytest.raises(ValueError, match="'toml' block"):
        marked_snippets(page)


def test_the_readme_stays_short_and_its_links_into_the_repository_resolve() -> None:
    assert len(README.splitlines()) <= 250
    targets = re.findall(r"\]\(((?:docs|examples)/[^)#]+)(?:#[^)]*)?\)", README)
    assert len(targets) > 15
    for target in targets:
        assert (ROOT / target).is_file(), target


def _documented_commands() -> set[tuple[str, ...]]:
    """The commands the first column of docs/cli.md's command table names, with subcommands."""
    table = CLI_PAGE.split("| command | what it does |", 1)[1]
    commands: set[tuple[str, ...]] = set()
    for row in re.findall(r"^\| (.+?) \| ", table, re.MULTILINE):
        for words in re.findall(r"`([a-z][a-z-]*(?: [a-z][a-z-]*)?)", row):
            commands.add(tuple(words.split()))
    return commands


def _parser_commands() -> set[tuple[str, ...]]:
    """Every command of the CLI's parser, a group's (`task`, `repo`, ...) as its subcommands."""

    def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return {name: sub for group in groups for name, sub in group.choices.items()}

    commands: set[tuple[str, ...]] = set()
    for name, sub in subcommands(build_parser()).items():
        children = subcommands(sub)
        commands |= {(name, child) for child in children} if children else {(name,)}
        if children and sub.get_default("handler") is not None:
            commands.add((name,))  # a command with subcommands of its own (`archive show`)
    return commands


def test_the_command_table_lists_exactly_the_cli_commands() -> None:
    documented, commands = _documented_commands(), _parser_commands()
    assert len(commands) > 40
    assert sorted(commands - documented) == [], "docs/cli.md's command table lacks these"
    assert sorted(documented - commands) == [], "docs/cli.md's command table names no such"


@pytest.mark.parametrize("command", sorted(_parser_commands()), ids=" ".join)
def test_every_documented_command_answers_help(command: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*command, "--help"])
    assert exited.value.code == 0
