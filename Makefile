# Tetraformer: `make test` and `make quickstart` build .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv bytecode test test-fast test-learning lint bench clean quickstart

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The lanes, each on as many pytest workers as the machine has cores (pytest-xdist; a test file, or a promise
# test's task, stays on one worker so its fixtures and reference runs are built once); pytest lists the 20 slowest.
# test: what proves the project (CI): everything but the long learning checks (7 min 5 s and 7 min 29 s from fresh
# clones on 2 cores of an AMD EPYC, 2026-12-07; docs/tests.md)
test: lint bytecode
	$(PY) -m pytest -q -n auto --dist loadgroup -m "not learning"

# the unit tests, without CLI fits or multi-process runs (the `slow` marker): 55 s on the same machine
test-fast: lint bytecode
	$(PY) -m pytest -q -m "not slow and not learning" -n auto --dist loadgroup

# the learning checks: a model must reach a number after a fit (CI runs them after `make test`)
test-learning: venv bytecode
	$(PY) -m pytest -q -m learning -n auto --dist loadgroup

# The package's bytecode, compiled where it changed: Python reads it even where PYTHONDONTWRITEBYTECODE (set in some
# sandboxes and CI images) stops it from writing it, so the ~100 fresh `tetraformer` processes of a test run do not
# each compile the package (and the test helpers their configs name) again (0.13 s of CPU apiece on 2 cores)
bytecode: venv
	$(PY) -m compileall -q platform tasks tests scripts

bench: venv
	$(PY) scripts/bench.py --markdown

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

RUN := runs/shakespeare_char

# Train a small character-level GPT on Shakespeare (~6 minutes on 2 CPU cores), then sample from it.
quickstart: venv
	$(VENV)/bin/tetraformer demo-data gutenberg
	rm -rf $(RUN)
	WANDB_MODE=$${WANDB_MODE:-offline} $(VENV)/bin/tetraformer fit -c configs/language_modeling/shakespeare_char.yaml
	$(VENV)/bin/tetraformer generate --ckpt $(RUN)/checkpoints/last.ckpt --prompt "ROMEO:" --max-new-tokens 120 --top-k 40
	$(VENV)/bin/tetraformer generate --ckpt $(RUN)/checkpoints/last.ckpt --prompt "JULIET:" --max-new-tokens 120 --top-k 40 --seed 1
	$(VENV)/bin/tetraformer summary $(RUN)
