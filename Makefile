# Tetraformer: `make test` and `make quickstart` build .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test lint bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

lint: venv
	$(VENV)/bin/ruff check .

test: lint
	$(PY) -m pytest -q

bench: venv
	$(PY) scripts/bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
