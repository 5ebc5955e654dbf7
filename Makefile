# The two commands the README promises: `make demo` and `make test`.
# Both run `setup` first (the Python environment; idempotent, works on a fresh machine); only the
# suite also installs the programs its tests start (system-deps: apt, as root) and builds llama-server.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# the package and what it runs on (all `make demo` needs)
STAMP := $(VENV)/.installed
# and the tools of the tests, the lint and the docs (the [dev] extra)
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: setup dev-setup system-deps llama-server gpu-bundle demo test test-fast lint docs cli-reference bench bench-scale k8s-dashboards webui clean

setup: $(STAMP)

dev-setup: $(DEV_STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[dev]'
	touch $(DEV_STAMP)

# Programs the tests start as real processes: promtool/prometheus, chromium.
system-deps:
	@bash scripts/install-system-deps.sh

# llama.cpp's llama-server for tests/e2e/test_llamacpp_real.py, built once per machine (about 23 min
# on 2 busy cores the first time, cached in ~/.cache/llm-swarm/llama-server; then under a second).
# Built here rather than in the test fixture: pytest's per-test timeout would cut a cold build.
llama-server: system-deps
	@bash scripts/llama-server-build.sh >/dev/null

# What scripts/gpu-check.sh carries to a GPU machine without network (docs/targets.md, "A GPU check"):
# .gpu-bundle/ (git-ignored) with llama.cpp's source and the wheels for Python 3.12 the machine lacks;
# prints the size with the working tree and how far under the 64 MiB limit it is (over it: exit 1).
gpu-bundle: setup
	$(PY) scripts/gpu_bundle.py

demo: setup
	$(VENV)/bin/swarm demo

# The whole suite (tests/: unit, integration, e2e) in its three tiers (scripts/test-tiers.sh,
# docs/testing.md), after the lint; prints each tier's time and the 30 slowest tests.
test: lint system-deps llama-server
	bash scripts/test-tiers.sh

# The in-process tests only (tests/unit: no process started): make test's unit tier, in under 45 s.
test-fast: dev-setup
	bash scripts/test-tiers.sh unit

lint: dev-setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The docs site (mkdocs.yml, pages under docs/) into site/; --strict: a broken link or anchor fails (CI runs it).
docs: dev-setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d site

# docs/cli.md from the parsers and the option table (tests/unit/test_cli_reference.py fails when it is stale).
cli-reference: dev-setup
	$(PY) scripts/cli_reference.py

# The request path's CPU cost without a server (~10 s), then the load benchmark against the simulator.
bench: dev-setup
	$(VENV)/bin/python benchmarks/request_cost.py --json bench-request-cost.json
	$(VENV)/bin/python benchmarks/run.py

# Cluster scale: one master with 16/64/256 (fake, replaying) workers; one worker with 10,000 streams.
bench-scale: dev-setup
	$(VENV)/bin/python benchmarks/master_scale.py
	$(VENV)/bin/python benchmarks/streams_10k.py

# The Grafana dashboards as ConfigMaps for Kubernetes (deploy/k8s/base/grafana-dashboards.yaml).
k8s-dashboards: dev-setup
	$(PY) scripts/k8s_dashboards.py

# The LLM tab's page (webui/, on Locust's locust-ui library) rebuilt into swarm/live/webui/bundle/,
# which is committed: only changing webui/src needs node/npm, never setup or test.
webui:
	cd webui && npm install --no-audit --no-fund && npx vite build

clean:
	rm -rf $(VENV) .pytest_cache .test-times build *.egg-info
