# Two entry points for a new user: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit bench generate clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The development server on the bundled example project; Ctrl-C stops it.
PROJECT ?= examples/safe-shell
PORT ?= 0
run: $(STAMP)
	$(BIN)/bundle-server $(PROJECT) --port $(PORT)

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check bundle_contract bundle_server conformance tests bench examples
	$(BIN)/ruff format --check bundle_contract bundle_server conformance tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q

bench: $(STAMP)
	for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

generate: $(STAMP)
	$(BIN)/python -m bundle_contract generate

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
