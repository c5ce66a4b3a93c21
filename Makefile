# Every target installs what it needs first; `make demo` and `make test` work on a fresh clone.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# What the product needs to run (the demo): no development tools, no MLflow server.
RUN_STAMP := $(VENV)/.installed-run

.PHONY: all install lint typecheck test test-unit demo docs bench chaos clean

all: lint typecheck test

$(BIN)/python:
	@$(PY) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "colabq needs Python >= 3.11; set PY=python3.11 or newer")'
	$(PY) -m venv $(VENV)

$(RUN_STAMP): pyproject.toml ops/constraints.txt | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -c ops/constraints.txt -e '.[demo]'
	@touch $(RUN_STAMP)

$(STAMP): pyproject.toml ops/constraints.txt $(RUN_STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -c ops/constraints.txt -e '.[dev,demo]'
	@touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check worker producer tests ops
	$(BIN)/ruff format --check worker producer tests ops

typecheck: install
	$(BIN)/mypy

test: install
	bash ops/test.sh

test-unit: install
	$(BIN)/pytest tests/unit tests/cli -q

demo: $(RUN_STAMP)
	$(BIN)/colabq demo

# The documentation site from docs/ into site/ (tests/unit/test_docs_site.py builds it too).
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Every benchmark, then one table against the anchors (about 10 minutes; not part of `make test`).
bench: install
	bash ops/ensure-redis.sh
	$(BIN)/python ops/bench/table.py

# kill -9, host loss, Redis, Hub and CLI faults, load, broken fleet members, the kill matrix:
# one table, all zero (about 28 minutes on 2 cores).
chaos: install
	bash ops/ensure-redis.sh
	$(BIN)/python -m ops.chaos

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
