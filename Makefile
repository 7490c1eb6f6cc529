# Paywarden: `make run` serves a demo on 127.0.0.1:8402, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
NODE_DIR := tests/support/node

.PHONY: run test lint bench test-deps clean

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Paywarden needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

# The benchmarks' extra: py-spy, for profiles of the server under load (PAYWARDEN_BENCH_PROFILE=1).
$(VENV)/.installed-bench: $(VENV)/.installed-dev
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	@touch $@

run: $(VENV)/.installed
	$(VENV)/bin/paywarden migrate
	$(VENV)/bin/paywarden demo
	$(VENV)/bin/paywarden serve --host 127.0.0.1 --port 8402

test: $(VENV)/.installed-dev
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check server auth tests alembic infra
	$(VENV)/bin/ruff format --check server auth tests alembic infra
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# Benchmarks (not part of `make test`): each prints its numbers, and the run ends with one table,
# also written to .pytest_cache/bench/results.md. PAYWARDEN_BENCH_QUICK=1 for a smoke run.
bench: $(VENV)/.installed-bench
	$(PY) -m pytest tests/bench -p no:cacheprovider -p no:randomly -q -s $(PYTEST_ARGS)

# Copy the last benchmark table into README.md's Performance section.
.PHONY: bench-readme
bench-readme: $(VENV)/.installed
	$(PY) -m tests.bench.readme

# What the chain tests need beyond Python: anvil, from npm.
test-deps:
	npm ci --prefix $(NODE_DIR) --no-audit --no-fund

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
