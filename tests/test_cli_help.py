"""The command line leads a new user: `--help` lists the commands by what a person is doing,
every `--help` ends with examples that parse with the very parser they document (and the first
of them run for real), and tab completion completes command names."""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from aios_ledger.shell.cli import COMMAND_GROUPS, HELP_GROUPS, build_parser, command_named, main
from aios_ledger.shell.cli_help import EXAMPLES, subcommands
from aios_ledger.shell.cli_support import Parser
from cli_runner import CliResult, run_cli

ROOT = Path(__file__).resolve().parents[1]
SHELL_OPERATORS = {"|", ">", "<", "&&"}


def _parsers(
    parser: argparse.ArgumentParser, path: str = ""
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for name, (child, _help) in subcommands(parser).items():
        found += _parsers(child, f"{path} {name}".strip())
    return found


@functools.cache
def every_parser() -> dict[str, argparse.ArgumentParser]:
    """The whole command line's parsers by command path, built once for the module's tests (a
    build costs 40 ms; reading a parser, or parsing with it, changes nothing in it)."""
    return dict(_parsers(build_parser()))


def test_every_command_is_in_exactly_one_group() -> None:
    registered = sorted(subcommands(build_parser()))
    grouped = [name for group in HELP_GROUPS for name in group.commands]
    assert sorted(grouped) == registered, set(grouped) ^ set(registered)
    assert len(grouped) == len(set(grouped))


def test_top_level_help_lists_the_groups_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    helped = capsys.readouterr().out
    places = [helped.index(f"\n  {group.title}: ") for group in HELP_GROUPS]
    assert places == sorted(places)
    start_here = helped[places[0] : places[1]]
    assert "\n    init " in start_here and "\n    status " in start_here
    assert "\n    serve " in helped[places[5] : places[6]]
    # argparse's own flat list of every command is gone: each command is listed once.
    assert helped.count("\n    worker ") == 1 and "{init," not in helped


@pytest.mark.parametrize("path", [path for path, _ in _parsers(build_parser())])
def test_every_help_ends_with_examples_of_itself(path: str) -> None:
    parser = every_parser()[path]
    helped = parser.format_help()
    assert "\nexamples:\n  " in helped, path
    assert EXAMPLES[path], path
    if parser.description is None:
        pytest.fail(f"{path!r} has no description")
    for command, _purpose in EXAMPLES[path]:
        assert command in helped, (path, command)  # kept as written: no rewrapping


@pytest.mark.parametrize("path", sorted(EXAMPLES))
def test_every_example_parses(path: str) -> None:
    """An example's `aios-ledger ...` part, up to a pipe or a redirection, is a valid command
    line; an example that names a command documents that command (or shows a related one)."""
    known = set(every_parser())
    assert path in known, f"examples for a command that does not exist: {path!r}"
    for command, _purpose in EXAMPLES[path]:
        substituted = re.search(r"\$\((.*)\)", command)  # eval "$(aios-ledger ...)"
        words = shlex.split(substituted.group(1) if substituted else command)
        if "aios-ledger" not in words:
            pytest.fail(f"{command!r} does not run aios-ledger")
        argv = words[words.index("aios-ledger") + 1 :]
        cut = [i for i, word in enumerate(argv) if word in SHELL_OPERATORS]
        argv = argv[: cut[0]] if cut else argv
        try:
            parsed = every_parser()[""].parse_args(argv)
        except SystemExit as exited:
            pytest.fail(f"{command!r} exited {exited.code}")
        # What a process running it parses with (its command's group alone) reads the same.
        alone = vars(build_parser(argv).parse_args(argv))
        assert _named(alone) == _named(vars(parsed)), command


def _named(parsed: dict[str, object]) -> dict[str, object]:
    """Parsed arguments, their handler by name (a closure is made anew by each parser)."""
    handler = parsed.get("handler")
    return {**parsed, "handler": getattr(handler, "__qualname__", handler)}


def test_each_group_of_commands_registers_the_commands_it_is_listed_with() -> None:
    """The command line imports the module of the command it runs, found by this list."""
    for module, names in COMMAND_GROUPS:
        commands = Parser(prog="aios-ledger").add_subparsers(parser_class=Parser)
        importlib.import_module(module).register(commands)
        assert tuple(commands.choices) == names, module
    listed = [name for _, names in COMMAND_GROUPS for name in names]
    assert listed == list(subcommands(build_parser()))


@pytest.mark.parametrize("path", [path for path, _ in _parsers(build_parser()) if path])
def test_a_command_alone_has_the_parser_and_help_it_has_among_all(path: str) -> None:
    argv = path.split()
    alone = build_parser(argv)
    (names,) = [names for _, names in COMMAND_GROUPS if argv[0] in names]
    assert tuple(subcommands(alone)) == names
    whole = every_parser()[path]
    assert dict(_parsers(alone))[path].format_help() == whole.format_help()


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["task", "list"], "task"),
        (["--db", "x.db", "--no-migrate", "task", "--help"], "task"),
        (["--db=x.db", "--log-level", "debug", "--log-format=json", "serve"], "serve"),
        (["--config", "status", "init"], "init"),  # `status` is the settings file's name
        ([], None),
        (["--help", "task"], None),
        (["-h"], None),
        (["--version"], None),
        (["--db", "x.db"], None),
        (["--unknown", "task"], None),
        (["--", "task"], None),
        (["no-such-command"], "no-such-command"),
    ],
)
def test_the_command_is_read_past_the_global_options(argv: list[str], command: str | None) -> None:
    assert command_named(build_parser(), argv) == command


def test_a_command_unknown_or_help_before_it_get_every_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    every = list(subcommands(build_parser()))
    for argv in (["no-such-command"], ["--help", "task"], []):
        assert list(subcommands(build_parser(argv))) == every
    assert main(["no-such-command"]) == 2
    assert "invalid choice: 'no-such-command' (choose from 'init', 'migrate'," in (
        capsys.readouterr().err
    )
    monkeypatch.setenv("_ARGCOMPLETE", "1")
    assert list(subcommands(build_parser(["task", "list"]))) == every


def test_a_command_imports_the_module_of_its_group_alone(tmp_path: Path) -> None:
    """`task list` loads the tasks' commands, not the server's, the MCP's or the log's, and
    neither httpx, jsonschema nor rich (its answer goes to a program, not a terminal): each cost
    every process of the command line its import."""
    ledger = str(tmp_path / "ledger.db")
    assert _cli("--db", ledger, "init", cwd=tmp_path).returncode == 0
    script = (
        "import json, sys\n"
        "from aios_ledger.shell.cli import main\n"
        f"assert main(['--db', {ledger!r}, 'task', 'list']) == 0\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(done.stderr))
    groups = {module for module, _ in COMMAND_GROUPS}
    assert groups & loaded == {"aios_ledger.shell.tasks.cli"}
    assert {
        "httpx",
        "jsonschema",
        "rich",
        "starlette",
        "mcp",
        "importlib.metadata",
    } & loaded == set()


def _cli(*argv: str, cwd: Path) -> CliResult:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOS_LEDGER")}
    return run_cli(*argv, cwd=cwd, env=env)


def test_the_first_examples_work_as_written(tmp_path: Path) -> None:
    """`init`, `task create --json examples/task.json`, `task list`, `status`, with the shipped
    example file, in an empty directory."""
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "task.json").write_bytes(
        (ROOT / "examples" / "task.json").read_bytes()
    )
    for command, _ in EXAMPLES[""]:
        done = _cli(*shlex.split(command)[1:], cwd=tmp_path)
        assert done.returncode == 0, (command, done.stderr)
    listed = json.loads(_cli("task", "list", cwd=tmp_path).stdout)
    assert [task["task_id"] for task in listed] == ["notes-1"]
    claim = next(command for command, _ in EXAMPLES["claim"] if "echo" in command)
    piped = subprocess.run(
        claim,
        shell=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["task_id"] == "notes-1"


def test_the_example_task_file_is_what_task_create_reads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = json.loads((ROOT / "examples" / "task.json").read_text())
    assert set(document) == {"idempotency_key", "task"}
    assert main(["schema", "task"]) == 0
    from jsonschema import Draft202012Validator

    Draft202012Validator(json.loads(capsys.readouterr().out)).validate(document)


def _complete(line: str, tmp_path: Path) -> list[str]:
    """What the shell's completion script gets back for `line` (argcomplete's protocol)."""
    answer = tmp_path / "completions"
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
    }
    done = subprocess.run(
        [sys.executable, "-m", "aios_ledger.shell.cli"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return [word.strip() for word in answer.read_text().split("\n")]


def test_completion_completes_command_names(tmp_path: Path) -> None:
    assert sorted(_complete("aios-ledger sta", tmp_path)) == ["status"]
    assert sorted(_complete("aios-ledger ver", tmp_path)) == [
        "verify",
        "verify-archive",
        "verify-attestation",
        "verify-checkpoint",
        "verify-export",
        "verify-proof",
    ]
    assert _complete("aios-ledger task li", tmp_path) == ["list"]
    assert "--follow" in _complete("aios-ledger events --fo", tmp_path)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_each_shells_script(
    shell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert "aios-ledger" in script and "_ARGCOMPLETE" in script
