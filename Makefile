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

run: $(VENV)/.installed
	$(VENV)/bin/paywarden migrate
	$(VENV)/bin/paywarden demo
	$(VENV)/bin/paywarden serve --host 127.0.0.1 --port 8402

test: $(VENV)/.installed-dev
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check server auth tests alembic
	$(VENV)/bin/ruff format --check server auth tests alembic
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: $(VENV)/.installed-dev
	$(PY) -m pytest tests/bench -p no:cacheprovider -q -s

# What the chain tests need beyond Python: anvil, from npm.
test-deps:
	npm ci --prefix $(NODE_DIR) --no-audit --no-fund

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
