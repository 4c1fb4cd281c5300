# The two set-up commands of the README: `make run` and `make test`.
# Both create .venv and install prepflow with the pinned constraints.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONSTRAINTS := constraints.txt
PYTEST_ARGS ?=

.PHONY: run test lint bench clean browser

$(STAMP): pyproject.toml $(CONSTRAINTS) examples/plugin/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=24" "setuptools>=68" wheel
	$(BIN)/python -m pip install -q -c $(CONSTRAINTS) -e ".[dev]"
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e examples/plugin  # the tests' example plugin
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/prepflow run examples/titanic/config.yaml --dataset examples/titanic/titanic.csv \
	  --output artifacts --cache-dir .prepflow-cache

test: $(STAMP) browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Headless Chromium (Debian's package) for the report's browser test (tests/integration/test_report_browser.py).
browser:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y --no-install-recommends chromium)

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf artifacts .prepflow-cache
