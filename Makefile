# Two commands matter: `make demo` and `make test` (`make check` adds the rest of CI). All build
# .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

# The browser tests (tests/test_console_browser.py, in `make check`) drive the system Chromium
# (/usr/bin/chromium).
.PHONY: setup bytecode demo test check lint soak bench-setup bench bench-quick bench-smoke docs screenshots readme-check clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

# axe-core, the accessibility checker the browser tests inject into each page, pinned, from the
# npm registry into .venv/node_modules; without npm the browser tests skip (AIOS_REQUIRE_BROWSER
# unset) or fail (set).
AXE_VERSION := 4.14.1
AXE := $(VENV)/node_modules/axe-core/axe.min.js

$(AXE): $(STAMP)
	@if command -v npm >/dev/null 2>&1; then \
		npm install --silent --prefix $(VENV) --no-save --no-audit --no-fund axe-core@$(AXE_VERSION); \
	else \
		echo "npm not found: axe-core not installed, the browser tests will skip"; \
	fi

setup: $(STAMP) $(AXE)

# The package's bytecode, written ahead: where PYTHONDONTWRITEBYTECODE=1 is set (as on these
# machines and in CI), no process writes it, so every CLI process the demo and the tests spawn
# compiled the modules it imports again (0.29 s of CPU per `status` instead of 0.18 here).
bytecode: $(STAMP)
	$(PY) -m compileall -q core entry shell sql > /dev/null

demo: $(STAMP) bytecode
	$(PY) examples/demo.py

lint: $(STAMP)
	$(VENV)/bin/ruff check core entry shell tests examples docs/hooks $(wildcard bench) $(wildcard tools)
	$(VENV)/bin/ruff format --check core entry shell tests examples docs/hooks $(wildcard bench) $(wildcard tools)
	mkdir -p .typecheck/aios_ledger
	for part in core entry shell sql; do ln -sfn "$(CURDIR)/$$part" ".typecheck/aios_ledger/$$part"; done
	MYPYPATH=.typecheck $(VENV)/bin/mypy -p aios_ledger.core -p aios_ledger.entry -p aios_ledger.shell -p aios_ledger.sql
	MYPYPATH=.typecheck $(VENV)/bin/mypy tests examples $(wildcard bench/*.py) $(wildcard bench/queue_harness/*.py) $(wildcard tools/*.py)  # docs/hooks: through tests/test_docs_site.py

# `make test` is the suite a change must pass, within five minutes on two cores: everything but
# the tests tests/conftest.py marks `postgresql`, `browser`, `kills` or `git_servers`. `make
# check` runs those, then what CI runs besides (`.ci/run`; CONTRIBUTING.md, "Test time"). Four
# test processes on two cores: part of the suite still waits on processes and servers.
TEST_SELECTION := not postgresql and not browser and not kills and not git_servers
CHECK_SELECTION := postgresql or browser or kills or git_servers

# pytest rewrites the asserts of every test module it imports, in each of the four processes,
# and keeps the result only where bytecode is written: so the runs write it (PYTHONDONTWRITEBYTECODE
# emptied), and one collection writes it first, on the core lint leaves idle.
PYTEST := PYTHONDONTWRITEBYTECODE= $(VENV)/bin/pytest

test: bytecode
	$(MAKE) --no-print-directory -j2 lint test-bytecode
	$(PYTEST) -q -n 4 -m "$(TEST_SELECTION)"

# A module that fails to import fails the run that follows, which says why.
.PHONY: test-bytecode
test-bytecode: $(STAMP)
	$(PYTEST) -qq --collect-only -p no:xdist > /dev/null || true

check: $(AXE) bytecode test-bytecode
	$(PYTEST) -q -n 4 -m "$(CHECK_SELECTION)"
	$(MAKE) bench-smoke docs readme-check

# The same suite at higher counts; the reliability tests append their figures (operations, kills,
# anomalies) to soak-figures.jsonl for docs/reliability.md.
soak: $(STAMP)
	rm -f soak-figures.jsonl
	AIOS_SOAK=1 AIOS_RELIABILITY_FIGURES=$(CURDIR)/soak-figures.jsonl $(VENV)/bin/pytest -q
	cat soak-figures.jsonl

# The benchmark's peers (Huey, DBOS) and profiler come from the `bench` extra, installed here
# and never by `make test`. One table on stdout, the same in bench/results/latest.json.
bench-setup: $(STAMP)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[bench]'

bench: bench-setup
	$(PY) -m bench

bench-quick: bench-setup
	$(PY) -m bench --quick

# Every part at tiny sizes, once, on SQLite and PostgreSQL with every peer: fails (exit 1) when a
# part cannot run or a figure is missing. For CI; its figures mean nothing.
bench-smoke: bench-setup
	$(PY) -m bench --smoke

# The console's pages at desktop and phone width, as docs/screenshots/*.png (docs/console.md):
# a seeded ledger, `serve`, the system Chromium under Playwright (tools/screenshots.py).
screenshots: $(STAMP) $(AXE)
	$(PY) tools/screenshots.py

# The documentation site: docs/ as MkDocs with Material, into site/. --strict fails on a broken
# link or anchor and on a page missing from the nav (mkdocs.yml); the benchmark-results page is
# rendered from bench/results/*.json by docs/hooks/bench_pages.py.
docs: $(STAMP)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# Runs every block of README.md and docs/ marked `<!-- ci: run -->`, as a reader would paste it.
readme-check: $(STAMP)
	$(PY) -m tests.readme_snippets README.md docs/getting-started.md docs/library.md

clean:
	rm -rf $(VENV) .typecheck .pytest_cache .mypy_cache .ruff_cache site
