# dpcomm: the two commands a new user needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# pytest-xdist workers of the parallel tests (docs/benchmarks.md, "The test suite").
TEST_WORKERS ?= auto

.PHONY: demo test check unit docs lint typecheck bench data capture-tools browser-tools system-tools \
	test-setup parallel-tests serial-tests clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@# uv fetches and installs the packages in parallel: about 30 s on a fresh machine, where
	@# pip took over a minute (docs/benchmarks.md, "The test suite").
	$(BIN)/pip install --quiet uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e ".[dev]"
	@# Byte-compiled once here: every worker of a local deployment imports the package anew
	@# (about 0.1 s each when PYTHONDONTWRITEBYTECODE keeps Python from caching it).
	$(BIN)/python -m compileall -q src >/dev/null
	touch $(STAMP)

# The paper's running example: average insulin by age range and by body-mass index, over the
# embedded (synthetic) diabetes table, with scramblers of n = 100 sources adding d = 50 dummies.
demo: $(STAMP)
	$(BIN)/dpcomm run aggregate --sql "SELECT A, B, AVG(I) FROM diabetes GROUP BY GROUPING SETS ((A), (B))" \
		--mechanism scrambler --batch 100 --dummies 50 --sampling 0.2 --delta 1e-4

# tcpdump (and iproute2 for network namespaces) for the packet-capture and multi-host tests;
# they skip, saying why, where these cannot be installed or used.
capture-tools:
	@command -v tcpdump >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 || \
	{ if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq tcpdump iproute2 >/dev/null || echo "warning: tcpdump not installed"; \
	  else echo "warning: not root: tcpdump not installed, capture tests will be skipped"; fi; }

# Headless Chromium and its driver (Debian's packages) for the tests that drive the explorer
# (and the documentation site) in a real browser; they skip, saying why, where these cannot be
# installed.
browser-tools:
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || \
	{ if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq chromium chromium-driver >/dev/null || echo "warning: chromium not installed"; \
	  else echo "warning: not root: chromium not installed, browser tests will be skipped"; fi; }

# The tests that load the machine or its network (marker serial) run first, beside mypy alone;
# then the rest in parallel workers (one per core). The suite builds the documentation site strictly
# (tests/integration/test_docs_site.py); `make docs` writes it to .venv/site.
# PYTHONDONTWRITEBYTECODE (set on the project's machines) is cleared for pytest: each worker then
# reuses the test modules compiled (and their asserts rewritten) by the first, not every run anew.
# The system packages one after the other (apt holds one lock), beside the venv's set-up.
system-tools:
	@$(MAKE) --no-print-directory capture-tools
	@$(MAKE) --no-print-directory browser-tools

test-setup:
	@$(MAKE) --no-print-directory -j2 $(STAMP) system-tools

# mypy (about 25 s of CPU on a fresh clone) checks the types beside the serial tests, which
# mostly wait (on a slow link, on an oversubscribed machine): the parallel tests then have
# every core to themselves.
test: test-setup
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples
	$(BIN)/vulture src vulture_whitelist.py --min-confidence 60
	@$(MAKE) --no-print-directory -j2 typecheck serial-tests
	@$(MAKE) --no-print-directory parallel-tests

parallel-tests: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal -m "not serial"

# (Every serial test is an integration test: the other folders are not collected.)
serial-tests: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -m serial tests/integration

# The inner loop (under two minutes): lint, types, dead code (vulture: code in src/ that
# nothing calls; what must stay is in vulture_whitelist.py, with why), unit and property tests.
check: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/vulture src vulture_whitelist.py --min-confidence 60
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n auto tests/unit tests/property

unit: $(STAMP)
	$(BIN)/pytest -n auto tests/unit

# The documentation site (mkdocs-material, the API reference from the docstrings by
# mkdocstrings, formulas by the MathJax copy it serves itself), built strictly: a broken link,
# cross-reference or unrenderable docstring fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site
	@echo "documentation site: $(VENV)/site/index.html"

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_exact_vs_mc.py
	$(BIN)/python benchmarks/bench_simulator.py
	$(BIN)/python benchmarks/bench_planner.py
	$(BIN)/python benchmarks/bench_audit.py
	$(BIN)/python benchmarks/bench_deployment.py
	$(BIN)/python benchmarks/bench_scrambler_throughput.py
	$(BIN)/python benchmarks/bench_explorer.py

# Fashion-MNIST (60k train / 10k test IDX files) from Debian's dataset-fashion-mnist package.
data:
	@if [ -d /usr/share/datasets/fashion-mnist ]; then echo "Fashion-MNIST already installed"; \
	else apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist; fi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/*.egg-info
