# `make demo` and `make test` work on a fresh machine: they create .venv when needed.
PYTHON ?= python3
VENV ?= .venv
PADDLE_VENV ?= .venv-paddle
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: test demo lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check checks bot tests benchmarks examples
	$(BIN)/mypy

# bubblewrap for the sandbox (scripts/bubblewrap.sh installs Debian's package when needed).
# PostgreSQL for the queue tests: scripts/postgres.sh starts a throwaway server (installing
# Debian's package when needed) and stops it when the tests end. The tests run in
# TEST_WORKERS pytest-xdist processes (most of their time is spent waiting on subprocesses
# and HTTP); loadgroup keeps the tests sharing a module-scoped fixture on one worker
# (tests/conftest.py), and each worker gets its own PostgreSQL database.
TEST_WORKERS ?= 2
test: lint $(PADDLE_VENV)/.installed
	bash scripts/bubblewrap.sh
	bash -c 'source scripts/postgres.sh && \
	  ALIGNBOT_PADDLE_PYTHON=$(abspath $(PADDLE_VENV))/bin/python $(BIN)/pytest -q \
	  --durations=25 -n $(TEST_WORKERS) --dist loadgroup'

demo: $(STAMP)
	$(BIN)/alignbot demo

bench: $(STAMP)
	$(BIN)/python benchmarks/engine_overhead.py

clean:
	rm -rf $(VENV) $(PADDLE_VENV) .pytest_cache .mypy_cache .ruff_cache

# A second, independent interpreter with Paddle (no torch): the real third-party candidate the
# tests check through --python. Its own venv, as a framework team would have it.
$(PADDLE_VENV)/.installed:
	test -x $(PADDLE_VENV)/bin/python || $(PYTHON) -m venv $(PADDLE_VENV)
	$(PADDLE_VENV)/bin/python -m pip install --quiet paddlepaddle==3.3.1
	touch $@
