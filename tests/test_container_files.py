"""The container image and the compose file say only what the project can do.

No container engine runs on the machines this suite runs on, so `deploy/container/check` (which
builds and runs the image) is the real test and `.ci/run` calls it where an engine can build. This
module holds the files to the code on every machine: the image copies every source directory the
package is built from, runs as a non-root user with its data on a volume, and every command the
compose file runs is one the CLI accepts, with the flags it has today.
"""

from __future__ import annotations

import argparse
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aios_ledger.shell.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
CONTAINER = ROOT / "deploy" / "container"
DATA_DIR = "/var/lib/aios-ledger"


def instructions(text: str) -> list[tuple[str, str]]:
    """The Containerfile's instructions as (KEYWORD, arguments), continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    found = []
    for raw in joined.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def final_stage(text: str) -> list[tuple[str, str]]:
    steps = instructions(text)
    last_from = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[last_from:]


def parses(argv: list[str]) -> argparse.Namespace:
    """The CLI's own parser on `argv`; a flag it does not have fails the test, not an exit."""
    try:
        return build_parser().parse_args(argv)
    except SystemExit as exit_:
        raise AssertionError(f"the CLI refuses {argv}: exit {exit_.code}") from None


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((CONTAINER / "compose.yaml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def ledger_services() -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in compose()["services"].items()
        if str(service.get("image", "")).endswith("aios-ledger:latest")
    }


def ledger_commands(service: dict[str, Any]) -> Iterator[list[str]]:
    """Each aios-ledger command line a service runs: its command under the image's entry
    point, or each `aios-ledger ...` line of its shell script (compose's `$$` is a `$`)."""
    command = service.get("command", [])
    if service.get("entrypoint", [None])[0] != "/bin/sh":
        yield ["--log-format", "json", *command]
        return
    script = re.sub(r"\\\n", " ", "\n".join(command)).replace("$$", "$")
    for match in re.finditer(r"aios-ledger ([^|;\n]*)", script):
        yield shlex.split(match.group(1))


def test_the_image_copies_every_directory_the_package_is_built_from() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    sources = set(pyproject["tool"]["setuptools"]["package-dir"].values())
    steps = instructions((CONTAINER / "Containerfile").read_text(encoding="utf-8"))
    copied = {
        args.split()[0] for keyword, args in steps if keyword == "COPY" and "--from" not in args
    }
    assert sources <= copied, f"not copied into the build stage: {sorted(sources - copied)}"
    for source in copied:
        assert (ROOT / source).exists(), f"the Containerfile copies {source}, which is not there"


def test_the_image_runs_as_a_non_root_user_with_its_data_on_a_volume() -> None:
    steps = final_stage((CONTAINER / "Containerfile").read_text(encoding="utf-8"))
    users = [args for keyword, args in steps if keyword == "USER"]
    assert users, "the final stage sets no USER: the image would run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "a numeric non-root uid (runtimes check it)"
    volumes = " ".join(args for keyword, args in steps if keyword == "VOLUME")
    assert DATA_DIR in volumes
    environment = " ".join(args for keyword, args in steps if keyword == "ENV")
    assert f"AIOS_LEDGER_DB={DATA_DIR}/" in environment, "the default ledger lives on the volume"


def test_the_image_command_is_one_the_cli_accepts() -> None:
    steps = final_stage((CONTAINER / "Containerfile").read_text(encoding="utf-8"))
    entry = next(args for keyword, args in steps if keyword == "ENTRYPOINT")
    command = next(args for keyword, args in steps if keyword == "CMD")
    entry_argv, command_argv = yaml.safe_load(entry), yaml.safe_load(command)
    assert entry_argv[0] == "aios-ledger"
    assert parses([*entry_argv[1:], *command_argv]).command == "serve"


@pytest.mark.parametrize("name", sorted(ledger_services()))
def test_every_compose_command_is_one_the_cli_accepts(name: str) -> None:
    commands = list(ledger_commands(ledger_services()[name]))
    assert commands, f"{name} runs no aios-ledger command"
    for argv in commands:
        parses(argv)


def test_every_ledger_service_runs_read_only_without_capabilities() -> None:
    for name, service in ledger_services().items():
        assert service.get("read_only") is True, name
        assert service.get("cap_drop") == ["ALL"], name
        assert "/tmp" in service.get("tmpfs", []), name


def test_the_compose_file_runs_two_servers_on_postgresql_two_workers_and_a_reviewer() -> None:
    services = ledger_services()
    commands = {name: list(ledger_commands(service)) for name, service in services.items()}
    parsed = [parses(argv) for argvs in commands.values() for argv in argvs]
    kinds = [args.command for args in parsed]
    assert kinds.count("worker") == 2 and kinds.count("review") == 1 and kinds.count("serve") == 2
    # The fleet signs with one key, the one `setup` makes.
    generated = {args.out for args in parsed if args.command == "key"}
    signing = {args.checkpoint_key for args in parsed if args.command == "serve"}
    assert len(signing) == 1 and signing == {str(path) for path in generated}
    assert all(
        service["environment"]["AIOS_LEDGER_DB"].startswith("postgresql://")
        for service in services.values()
    )
    issued = {
        argv[2] for argvs in commands.values() for argv in argvs if argv[:2] == ["token", "issue"]
    }
    for argvs in commands.values():
        for argv in argvs:
            if "--token-file" in argv:
                token_file = Path(argv[argv.index("--token-file") + 1]).name
                assert token_file.removesuffix(".token") in issued, token_file
    for argvs in commands.values():
        for argv in argvs:
            if "--exec" in argv:
                program = shlex.split(argv[argv.index("--exec") + 1])[-1]
                assert (ROOT / "examples" / Path(program).name).is_file(), program
