# Paywarden: `make run` serves a demo on localhost:8402, `make try` a playground that really pays
# (on a local chain), `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
NODE_DIR := tests/support/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed
CHROMIUM := /usr/bin/chromium

.PHONY: run try test lint bench test-deps node-deps chromium haproxy clean

# The virtual environment holds exactly what uv.lock pins (uv sync --locked refuses a lock that no
# longer matches pyproject.toml); uv itself comes from PyPI into the environment first.
SYNC := UV_PROJECT_ENVIRONMENT=$(VENV) $(PY) -m uv sync --quiet --locked --python $(PY)

$(VENV)/.installed: pyproject.toml uv.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Paywarden needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv
	$(SYNC)
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(SYNC) --extra dev
	@touch $@

# The benchmarks' extra: py-spy, for profiles of the server under load (PAYWARDEN_BENCH_PROFILE=1).
$(VENV)/.installed-bench: $(VENV)/.installed-dev
	$(SYNC) --extra dev --extra bench
	@touch $@

run: $(VENV)/.installed
	$(VENV)/bin/paywarden migrate
	$(VENV)/bin/paywarden demo
	$(VENV)/bin/paywarden serve --host 127.0.0.1 --port 8402

# A playground where an agent really pays, with no real money: anvil, the test USDC token, a funded
# wallet, a local x402 seller and Paywarden on http://localhost:$(TRY_PORT). Ctrl-C stops it all.
# It is made of the test harness (tests/support), hence the dev extras and the npm tools.
TRY_PORT ?= 8402

try: $(VENV)/.installed-dev node-deps
	$(PY) -m tests.support.playground --port $(TRY_PORT)

# The suite runs in two processes per core (pytest-xdist): its tests wait on servers, chains and
# browsers more than they compute. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) * 2 )))

test: $(VENV)/.installed-dev node-deps
	$(PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check server auth tests alembic infra
	$(VENV)/bin/ruff format --check server auth tests alembic infra
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# Benchmarks (not part of `make test`): each prints its numbers, and the run ends with one table,
# also written to .pytest_cache/bench/results.md. PAYWARDEN_BENCH_QUICK=1 for a smoke run.
bench: $(VENV)/.installed-bench
	$(PY) -m pytest tests/bench -p no:cacheprovider -p no:randomly -q -s $(PYTEST_ARGS)

# Copy the last benchmark table into docs/performance.md.
.PHONY: bench-readme
bench-readme: $(VENV)/.installed
	$(PY) -m tests.bench.readme

# What the tests need beyond Python. From npm (no root needed, so `make test` does it too): anvil,
# Node.js 22 and the MCP conformance suite, exactly as package-lock.json pins them. From Debian:
# chromium for the browser tests and haproxy for the load balancer's, which need root and so only
# `make test-deps` installs them.
test-deps: node-deps chromium haproxy

ifneq ($(shell command -v npm 2>/dev/null),)
node-deps: $(NODE_STAMP)
else
node-deps:
	@echo "npm not found: anvil, Node.js 22 and the conformance suite are not installed; their tests skip"
endif

$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	npm ci --prefix $(NODE_DIR) --no-audit --no-fund
	@touch $@

chromium:
	@if [ -x $(CHROMIUM) ]; then echo "chromium: $(CHROMIUM) is installed"; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else echo "chromium not found and not root: run 'apt-get install chromium' as root (browser tests skip)"; fi

# The load balancer of infra/ (HAProxy), which the affinity test runs in front of two servers.
haproxy:
	@if command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ]; then echo "haproxy is installed"; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy; \
	else echo "haproxy not found and not root: run 'apt-get install haproxy' as root (its tests skip)"; fi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
