# Gradeq: `make run` runs the whole pipeline locally, `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The tested versions of the runtime dependencies; the image installs the same.
CONSTRAINTS := services/constraints.txt

.PHONY: install run test lint unit bench bench-tools image-test run-google-emulators soak clean constraints mutation mutation-changed terraform-check

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
	$(VENV)/bin/ruff check shared services localcloud gradeq tests bench scripts
	$(VENV)/bin/ruff format --check shared services localcloud gradeq tests bench scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy scripts/*.py

test: lint
	$(PY) -m pytest

# terraform validate, plan (empty state, terraform/examples/minimal.tfvars) and terraform
# test, offline, against the provider stand-in (docs/terraform-check.md). `make test`
# runs the same through tests/infra/test_terraform_check.py.
terraform-check: install
	$(PY) -m localcloud.terraform_provider.check

unit: install
	$(PY) -m pytest tests/unit tests/contract -m "not emulator"

# Seeded, time-bounded: load + SIGKILL/SIGSTOP faults on the local stack, then invariants;
# on the embedded backend with a client's budget held and released, on the official
# emulators (google-emulators), in batch mode, and against a provider whose quota binds.
SOAK_ARGS ?= --seed 13 --jobs 300 --duration 180
soak: install
	$(PY) -m localcloud.soak --budgets $(SOAK_ARGS)
	$(PY) -m localcloud.soak --backend google-emulators $(SOAK_ARGS)
	$(PY) -m localcloud.soak --batch $(SOAK_ARGS)
	$(PY) -m localcloud.soak --gradebook $(SOAK_ARGS)
	$(PY) -m localcloud.soak --quota-rpm 30 --budgets $(SOAK_ARGS)

# Gradeq's embedded default side by side with Flask + Celery and Flask + RQ (bench/peers.py,
# under 10 minutes). The peers run from their own venv; Redis and wrk come from Debian's
# packages when missing. BENCH_ARGS passes options, e.g. BENCH_ARGS="--rounds 5".
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed
BENCH_ARGS ?=

$(BENCH_STAMP): bench/requirements.txt $(CONSTRAINTS)
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -c $(CONSTRAINTS) -r bench/requirements.txt
	touch $(BENCH_STAMP)

bench-tools:
	@if ! command -v redis-server >/dev/null 2>&1 || ! command -v wrk >/dev/null 2>&1; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server wrk; \
	fi

bench: install $(BENCH_STAMP) bench-tools bench-lanes bench-bill bench-quota bench-http-pool
	$(BENCH_VENV)/bin/python -m bench.peers --gradeq-python $(PY) $(BENCH_ARGS)
	$(PY) -m bench.assignment_batch $(BENCH_ASSIGNMENTS_ARGS)

# CPU per request of the local dispatcher's and bus's HTTP client against urllib3's pool
# manager, interleaved in one process (bench/http_pool_cpu.py, a few seconds).
.PHONY: bench-http-pool
bench-http-pool: install
	$(PY) -m bench.http_pool_cpu

# What an assignment of 500 answers costs (bench/bill.py, about two minutes): naive,
# prefix-cached, batch-priced and both, in tokens and money per answer from the price table.
BENCH_BILL_ARGS ?=
.PHONY: bench-bill
bench-bill: install
	$(PY) -m bench.bill $(BENCH_BILL_ARGS)

# A class's 1,000 answers in one batch against 1,000 single POSTs (docs/assignments.md).
.PHONY: bench-assignments
bench-assignments: install
	$(PY) -m bench.assignment_batch $(BENCH_ASSIGNMENTS_ARGS)

# Priority lanes (bench/lanes.py, about two minutes): 2,000 bulk jobs queued, then 50 exam
# jobs; exam queue wait and bulk throughput, on lanes and on a single lane side by side.
BENCH_LANES_ARGS ?=
.PHONY: bench-lanes
bench-lanes: install
	$(PY) -m bench.lanes $(BENCH_LANES_ARGS)

# One provider quota shared by 1, 4 and 16 worker processes, and the adaptive limit
# (bench/quota.py, about four minutes; the quota's minute is 6 s: docs/benchmarks.md).
BENCH_QUOTA_ARGS ?=
.PHONY: bench-quota
bench-quota: install
	$(PY) -m bench.quota $(BENCH_QUOTA_ARGS)

# RPCs per request of the Google adapters on the official emulators and the local Cloud
# Tasks API, by method; fails if a client or channel is built per request.
GOOGLE_CALLS_ARGS ?= --n 50
.PHONY: google-calls
google-calls: install
	$(PY) bench/google_calls.py $(GOOGLE_CALLS_ARGS)

# Re-pin from the venv: a dependency new in pyproject.toml is installed at its newest
# version, the others stay as installed (upgrade one with pip install -U first); then
# `make test` checks the pinned set.
constraints:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) scripts/freeze-constraints.py
	touch $(STAMP)

# Mutation testing of the decisions (docs/testing.md; not part of `make test`). mutmut
# imports the mutated copy in mutants/, so it runs from a venv that holds the dependencies
# but not the editable install, whose import hook would load the unmutated code instead.
# `mutation` mutates every file [tool.mutmut] names (CI weekly, before a release);
# `mutation-changed` only those changed since BASE (everyday use). Each mutant runs only
# the tests that reach its function (mutmut's stats). scripts/mutation_run.py is
# `mutmut run` whose wall-clock deadlines signal only the child they were set for.
MUTATION_VENV := .venv-mutation
MUTMUT := mutmut==3.8.1
BASE ?= main

$(MUTATION_VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(MUTATION_VENV)
	$(MUTATION_VENV)/bin/python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['dev']))" > $(MUTATION_VENV)/requirements.txt
	$(MUTATION_VENV)/bin/pip install --quiet -c $(CONSTRAINTS) -r $(MUTATION_VENV)/requirements.txt $(MUTMUT)
	touch $@

mutation: $(MUTATION_VENV)/.installed
	rm -rf mutants
	$(MUTATION_VENV)/bin/python scripts/mutation_run.py run > $(MUTATION_VENV)/run.log 2>&1 || (tail -30 $(MUTATION_VENV)/run.log; exit 1)
	$(MUTATION_VENV)/bin/python scripts/mutation_report.py

mutation-changed: $(MUTATION_VENV)/.installed
	rm -rf mutants
	$(MUTATION_VENV)/bin/python scripts/mutation_changed.py $(BASE) > $(MUTATION_VENV)/changed.txt
	@if [ ! -s $(MUTATION_VENV)/changed.txt ]; then echo "no mutated file changed since $(BASE)"; exit 0; fi; \
	xargs -d '\n' $(MUTATION_VENV)/bin/python scripts/mutation_run.py run < $(MUTATION_VENV)/changed.txt > $(MUTATION_VENV)/run.log 2>&1 \
		|| { grep -q "nothing matches" $(MUTATION_VENV)/run.log && echo "no mutants in the files changed since $(BASE)" && exit 0; \
			tail -30 $(MUTATION_VENV)/run.log; exit 1; }; \
	$(MUTATION_VENV)/bin/python scripts/mutation_report.py

clean:
	rm -rf $(VENV) $(MUTATION_VENV) $(BENCH_VENV) mutants data .pytest_cache .mypy_cache .ruff_cache

image-test: install
	bash scripts/image-test.sh
