"""The documentation site builds with `mkdocs build --strict`, which fails on a dead link and on
a page left out of the nav; its benchmark page is rendered from a result file, or says there is
none (docs/hooks/bench_pages.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from docs.hooks.bench_pages import (
    MARKER,
    NO_RESULTS,
    newest_result,
    on_page_markdown,
    render_results,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "bench_result.json"


def a_site_tree(tmp_path: Path) -> Path:
    """The parts of the repository the site reads, copied, so a test can break them."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "docs", tree / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "examples", tree / "examples")
    for name in ("mkdocs.yml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    return tree


def build(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tree / "site")],
        cwd=tree,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
    )


def test_the_site_builds_strictly_with_its_results_page(tmp_path: Path) -> None:
    tree = a_site_tree(tmp_path)
    done = build(tree)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "No benchmark results in this tree"
        in (tree / "site/benchmark-results/index.html").read_text()
    )
    started = (tree / "site/getting-started/index.html").read_text()
    assert "examples/task.json" in started and "examples/binding.json" in started
    assert "--8&lt;--" not in started


def test_a_dead_link_fails_the_build(tmp_path: Path) -> None:
    tree = a_site_tree(tmp_path)
    with (tree / "docs" / "glossary.md").open("a") as page:
        page.write("\nSee [a page that is not there](no-such-page.md).\n")
    done = build(tree)
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr


def test_a_dead_anchor_fails_the_build(tmp_path: Path) -> None:
    tree = a_site_tree(tmp_path)
    with (tree / "docs" / "glossary.md").open("a") as page:
        page.write("\nSee [no such section](cli.md#no-such-section).\n")
    done = build(tree)
    assert done.returncode != 0
    assert "no-such-section" in done.stderr


def test_a_page_left_out_of_the_nav_fails_the_build(tmp_path: Path) -> None:
    tree = a_site_tree(tmp_path)
    (tree / "docs" / "orphan.md").write_text("# Orphan\n\nIn docs/, not in the nav.\n")
    done = build(tree)
    assert done.returncode != 0
    assert "orphan.md" in done.stderr


def test_the_results_page_shows_every_figure_of_the_newest_run(tmp_path: Path) -> None:
    tree = a_site_tree(tmp_path)
    results = tree / "bench" / "results"
    results.mkdir(parents=True)
    older = json.loads(FIXTURE.read_text())
    older["meta"] = {**older["meta"], "date": "2026-01-01T00:00:00Z", "commit": "olderrun"}
    (results / "older.json").write_text(json.dumps(older))
    shutil.copy(FIXTURE, results / "latest.json")
    done = build(tree)
    assert done.returncode == 0, done.stderr[-3000:]
    page = (tree / "site/benchmark-results/index.html").read_text()
    assert "1b7581bfixture" in page and "olderrun" not in page
    assert "2026-11-30T16:18:00Z" in page and "Linux-fixture-x86_64" in page
    for figure in json.loads(FIXTURE.read_text())["figures"]:
        assert figure["figure"] in page
    assert "5,934" in page and "0.526" in page and "MISSED" in page
    assert page.count("<svg") >= 1 and "<rect" in page


def test_rendering_without_results_says_how_to_make_them(tmp_path: Path) -> None:
    assert newest_result(tmp_path / "missing") is None
    assert render_results(tmp_path) == NO_RESULTS + "\n"
    assert "make bench" in NO_RESULTS


def test_rendering_a_run_charts_its_ratios_and_tables_every_figure(tmp_path: Path) -> None:
    shutil.copy(FIXTURE, tmp_path / "latest.json")
    text = render_results(tmp_path)
    table_rows = [
        line
        for line in text.splitlines()
        if line.startswith("| 1 ") or line.startswith("| 3 ") or line.startswith("| 4 ")
    ]
    assert len(table_rows) == 4
    chart = text[text.index("<svg") : text.index("</svg>")]
    assert chart.count("<rect") == 2  # the two ratios, not the rates or latencies
    assert "#c62828" in chart and "#2e7d32" in chart  # missed and met
    assert "| commit | 1b7581bfixture |" in text


def test_the_hook_leaves_other_pages_alone() -> None:
    config = {"config_file_path": str(ROOT / "mkdocs.yml")}
    assert on_page_markdown("# A page\n", None, config, None) == "# A page\n"
    assert MARKER not in on_page_markdown(f"# Results\n\n{MARKER}\n", None, config, None)
