# Rewind — everything a fresh clone needs, from nothing.
# `make demo` and `make test` create .venv, install the project, ensure Java 17+.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HYPOTHESIS_PROFILE ?= ci
export HYPOTHESIS_PROFILE

.PHONY: venv demo test test-deep bench bench-quick lint java clean dist

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# .venv with Rewind installed: `. .venv/bin/activate` puts `rewind` on PATH (the README's tour).
venv: $(STAMP)

java:
	@bash .ci/ensure-java

demo: $(STAMP) java
	$(PY) -m engine.demo

test: $(STAMP) java
	$(PY) -m pytest -q -n auto --maxprocesses=4 --durations=25

test-deep: $(STAMP) java
	HYPOTHESIS_PROFILE=deep $(PY) -m pytest -q -n auto --maxprocesses=4

bench: $(STAMP) java
	$(PY) -m benchmarks.run_all

bench-quick: $(STAMP) java
	$(PY) -m benchmarks.run_all --quick

# The zip a Spark job ships to its executors (docs/cluster.md).
dist: $(STAMP)
	$(VENV)/bin/rewind spark package --out dist

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy tenants engine tests

clean:
	rm -rf $(VENV) dist build .rewind .rewind-demo .rewind-cluster catalog.db .pytest_cache .hypothesis .mypy_cache .ruff_cache
