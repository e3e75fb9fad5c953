"""Two builds of the ledger side by side: a base commit against the working tree, interleaved.

The working tree is built from a copy of what git sees in it (tracked and untracked files, not
ignored ones), so no earlier build's leftovers reach the measurement.

    .venv/bin/python -m bench.ab --base REF            # parts 1, 2, 5, 8 and appends, 5 rounds
    .venv/bin/python -m bench.ab --base REF --only run-appends,run-appends-normal
    .venv/bin/python -m bench.ab --base REF --only transitions-memory --reps 9  # CPU time
    .venv/bin/python -m bench.ab --base REF --only api-http --quick  # part 8 through serve
    .venv/bin/python -m bench.ab --base REF --quick    # smaller sizes
    .venv/bin/python -m bench.ab --base REF --new REF2 # two commits, neither the working tree

Each build is installed (`pip install --target`, not editable, the same way for both) into a
folder of its own, and every measurement runs in a fresh process (`bench.ab_worker`) whose
PYTHONPATH finds that build first; the worker reports which `aios_ledger.core` it imported, and
a measurement of the wrong build is an error. Rounds alternate which build goes first. Each
figure is the median of the rounds, with the round-by-round ratio new/base (1.0: the same
speed; the redesign's target is each median within 5 %).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .ab_worker import UNITS
from .harness import figure, figures_table, paired_ratio, say, summary

ROOT = Path(__file__).resolve().parent.parent
# figure -> (part, size of a full run, size of a quick run)
FIGURES = {
    "transitions": ("1 transitions", 2000, 300),
    "transitions-memory": ("1 transitions", 3000, 600),
    "lifecycles": ("2 lifecycles", 2000, 400),
    "lifecycles-batched": ("2 lifecycles", 5000, 1000),
    "lifecycles-batched-normal": ("2 lifecycles", 5000, 1000),
    "aux": ("5 aux runs", 1000, 200),
    "run-appends": ("evidence appends", 2000, 400),
    "run-appends-normal": ("evidence appends", 5000, 1000),
    # Part 8's HTTP round: lifecycles per agent (32 agents), as part 8 sizes it.
    "api-http": ("8 HTTP API", 10, 4),
}


# Where a figure's ledger lives, when not in a file at synchronous FULL.
LEVELS = {
    "transitions-memory": "in memory",
    "run-appends-normal": "NORMAL",
    "lifecycles-batched-normal": "NORMAL",
}


def install(source: Path, target: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
    )


def export_commit(ref: str, folder: Path) -> None:
    folder.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", ref], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)


def export_tree(root: Path, folder: Path) -> None:
    """The working tree as git sees it (tracked and untracked files, not ignored ones): a build
    from it never picks up a `build/` folder (or any other leftover) an earlier build wrote."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    )
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = root / name
        if source.is_file():  # a tracked file deleted in the tree is not there
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)


def measure(site: Path, name: str, size: int, scratch: Path) -> float:
    path = scratch / f"{name}-{os.getpid()}-{len(list(scratch.iterdir()))}.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "bench.ab_worker", name, str(size), str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} on {site} failed:\n{done.stderr[-3000:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    if not str(answer["core"]).startswith(str(site)):
        raise RuntimeError(f"{name} measured {answer['core']}, not the build in {site}")
    return float(answer["value"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--new", default=None, help="a commit to measure (default: the tree)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated figure names")
    args = parser.parse_args(argv)
    names = [name for name in args.only.split(",") if name] or list(FIGURES)
    with tempfile.TemporaryDirectory(prefix="aios-ab-") as tmp:
        scratch = Path(tmp)
        sources = {"base": scratch / "base-source", "new": scratch / "new-source"}
        export_commit(args.base, sources["base"])
        if args.new is not None:
            export_commit(args.new, sources["new"])
        else:
            export_tree(ROOT, sources["new"])
        sites = {"base": scratch / "base", "new": scratch / "new"}
        for side, source in sources.items():
            install(source, sites[side])
        runs = scratch / "runs"
        runs.mkdir()
        rows = []
        for name in names:
            part, full, quick = FIGURES[name]
            size = quick if args.quick else full
            values: dict[str, list[float]] = {"base": [], "new": []}
            for round_number in range(args.reps):
                order = ("base", "new") if round_number % 2 == 0 else ("new", "base")
                for side in order:
                    values[side].append(measure(sites[side], name, size, runs))
            unit = UNITS[name]
            level = LEVELS.get(name, "FULL")
            for side in ("base", "new"):
                rows.append(figure(part, f"{name} {side} {level}", summary(values[side]), unit))
            ratio = paired_ratio(values["new"], values["base"])
            met = ratio["median"] >= 0.95
            rows.append(figure(part, f"{name} new/base", ratio, "ratio", target=">= 0.95", met=met))
            say(f"{name}: done")
    new = args.new or "the working tree"
    say(f"base {args.base} against {new}, {args.reps} interleaved rounds")
    say(figures_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
