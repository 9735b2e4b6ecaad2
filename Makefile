# Gradeq: `make run` runs the whole pipeline locally, `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The tested versions of the runtime dependencies; the image installs the same.
CONSTRAINTS := services/constraints.txt

.PHONY: install run test lint unit bench image-test run-google-emulators clean constraints

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(PY) -m localcloud

run-google-emulators: install
	$(PY) -m localcloud --backend google-emulators --data-dir data/google-emulators

lint: install
	$(VENV)/bin/ruff check shared services localcloud tests bench scripts
	$(VENV)/bin/ruff format --check shared services localcloud tests bench scripts
	$(VENV)/bin/mypy

test: lint
	$(PY) -m pytest

unit: install
	$(PY) -m pytest tests/unit tests/contract -m "not emulator"

bench: install
	$(PY) bench/bench_enqueue.py
	$(PY) bench/cost_per_job.py

# Re-pin from the venv: a dependency new in pyproject.toml is installed at its newest
# version, the others stay as installed (upgrade one with pip install -U first); then
# `make test` checks the pinned set.
constraints:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) scripts/freeze-constraints.py
	touch $(STAMP)

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache

image-test: install
	bash scripts/image-test.sh
