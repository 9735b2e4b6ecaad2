# Gradeq: `make run` runs the whole pipeline locally, `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test lint unit bench image-test run-google-emulators clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(PY) -m localcloud

run-google-emulators: install
	$(PY) -m localcloud --backend google-emulators --data-dir data/google-emulators

lint: install
	$(VENV)/bin/ruff check shared services localcloud gradeq tests bench
	$(VENV)/bin/ruff format --check shared services localcloud gradeq tests bench
	$(VENV)/bin/mypy

test: lint
	$(PY) -m pytest

unit: install
	$(PY) -m pytest tests/unit tests/contract -m "not emulator"

bench: install
	$(PY) bench/bench_enqueue.py
	$(PY) bench/cost_per_job.py

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache

image-test: install
	bash scripts/image-test.sh
