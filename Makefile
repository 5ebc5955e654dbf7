# The two commands the README promises: `make demo` and `make test`.
# Both run `setup` first; setup is idempotent and works on a fresh machine.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup system-deps demo test test-fast lint bench clean

setup: $(STAMP) system-deps

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

# Programs the tests start as real processes: promtool/prometheus, chromium.
system-deps:
	@bash scripts/install-system-deps.sh

demo: setup
	$(VENV)/bin/swarm demo

# The whole suite (tests/: unit, integration, e2e), after the lint.
test: lint
	$(VENV)/bin/python -m pytest

# The in-process tests only (tests/unit: no process started), in well under a minute.
test-fast: setup
	$(VENV)/bin/python -m pytest tests/unit -q

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The request path's CPU cost without a server (~10 s), then the load benchmark against the simulator.
bench: setup
	$(VENV)/bin/python benchmarks/request_cost.py --json bench-request-cost.json
	$(VENV)/bin/python benchmarks/run.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
