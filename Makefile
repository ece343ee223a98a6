# `make demo` and `make test` work on a fresh machine: they create .venv when needed.
PYTHON ?= python3
VENV ?= .venv
PADDLE_VENV ?= .venv-paddle
TORCHAX_VENV ?= .venv-torchax
OPENVINO_VENV ?= .venv-openvino
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# A candidate interpreter's stamp names its pins' checksum: new pins, a new interpreter.
candidate_stamp = $(1)/.installed-$(shell cat requirements/$(2).txt | cksum | cut -d' ' -f1)
TORCHAX_STAMP := $(call candidate_stamp,$(TORCHAX_VENV),torchax)
OPENVINO_STAMP := $(call candidate_stamp,$(OPENVINO_VENV),openvino)

.PHONY: test demo lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# mypy reads the packages under their import name (pyproject.toml, [tool.mypy]) through the
# links in .lint/alignbot, made again each time.
lint: $(STAMP)
	$(BIN)/ruff check checks bot tests benchmarks examples
	mkdir -p .lint/alignbot && ln -sfn ../../checks .lint/alignbot/checks \
	  && ln -sfn ../../bot .lint/alignbot/bot
	$(BIN)/mypy

# Everything the tests need, built side by side by `make test` (`--jobs`): .venv with ruff
# and mypy run, the candidates' interpreters, and Debian's packages (scripts/packages.sh:
# bubblewrap for the sandbox, Chromium for the status page's browser test, PostgreSQL for the
# queue tests, in one apt-get run when missing). scripts/postgres.sh starts a throwaway
# PostgreSQL server and stops it when the tests end. The tests run in TEST_WORKERS
# pytest-xdist processes; loadgroup keeps the tests sharing a module-scoped fixture on one
# worker (tests/conftest.py), and each worker gets its own PostgreSQL database.
# `make test-fast` is the lane to run while you work: everything but the tests marked `slow`
# (each took 2 s or more, or shares a module-scoped fixture with one that did).
# Three workers on two cores: much of the suite waits (on timeouts, services, sandboxes), so
# a third overlaps the waits (measured on 122 tests of five files: 390 s wall at -n 2, 322 s at
# -n 3, the same CPU).
TEST_WORKERS ?= 3
# The suite starts many interpreters that import this project (engines, workers, services,
# repros): each reads the compiled modules that the first one wrote. PYTHONDONTWRITEBYTECODE
# in the caller's environment would make every one compile them again (measured on two
# cores: test_security_commands and test_serve take 10% less CPU with it unset).
unexport PYTHONDONTWRITEBYTECODE
# The interpreters' packages are installed without compiling them (--no-compile): the first
# import compiles what is used, a fraction of torch's modules (one torch install: 62 -> 24 s
# wall here). The suite runs one torch process per core and more: each keeps to one thread
# (OMP_NUM_THREADS=1; measured on test_engine + test_triage: 7% less CPU than a thread per
# core); the sandboxed checks set their own.
SETUP_JOBS ?= 4
PYTEST = bash -c 'source scripts/postgres.sh && OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
	  ALIGNBOT_PADDLE_PYTHON=$(abspath $(PADDLE_VENV))/bin/python \
	  ALIGNBOT_TORCHAX_PYTHON=$(abspath $(TORCHAX_VENV))/bin/python \
	  ALIGNBOT_OPENVINO_PYTHON=$(abspath $(OPENVINO_VENV))/bin/python $(BIN)/pytest -q \
	  -n $(TEST_WORKERS) --dist loadgroup '

.PHONY: setup packages test-fast
setup: lint candidates packages

packages:
	bash scripts/packages.sh

test:
	$(MAKE) --no-print-directory --jobs=$(SETUP_JOBS) --output-sync=target setup
	$(PYTEST)'--durations=25 --junitxml=.test-results.xml'

test-fast:
	$(MAKE) --no-print-directory --jobs=$(SETUP_JOBS) --output-sync=target setup
	$(PYTEST)'-m "not slow" --durations=10'

demo: $(STAMP)
	$(BIN)/alignbot demo

bench: $(STAMP)
	$(BIN)/python benchmarks/engine_overhead.py

clean:
	rm -rf $(VENV) $(PADDLE_VENV) $(TORCHAX_VENV) $(OPENVINO_VENV) .pytest_cache .mypy_cache .ruff_cache

# A second, independent interpreter with Paddle (no torch): the real third-party candidate the
# tests check through --python. Its own venv, as a framework team would have it.
$(PADDLE_VENV)/.installed:
	test -x $(PADDLE_VENV)/bin/python || $(PYTHON) -m venv $(PADDLE_VENV)
	$(PADDLE_VENV)/bin/python -m pip install --quiet --no-compile paddlepaddle==3.3.1
	touch $@

# Real candidates nobody here wrote, each in an interpreter of its own beside the CPU build of
# the reference's torch, every package pinned in requirements/NAME.txt: built once and kept
# until the pins change. Where pip cannot install them, VENV/.unavailable keeps pip's last
# words, make says so, and their tests skip with that reason (the next make tries again).
define candidate_venv
	rm -rf $(1) && $(PYTHON) -m venv $(1)
	if $(1)/bin/python -m pip install --quiet --no-compile -r requirements/$(2).txt > $(1)/pip.log 2>&1; \
	then touch $@; \
	else { grep '^ERROR' $(1)/pip.log || tail -n 1 $(1)/pip.log; } | cut -c1-200 | tail -n 2 \
	  | tr -s '\n' ' ' > $(1)/.unavailable; \
	  echo "make: $(2) cannot be installed; its tests are skipped: $$(cat $(1)/.unavailable)"; fi
endef

$(TORCHAX_STAMP): requirements/torchax.txt
	$(call candidate_venv,$(TORCHAX_VENV),torchax)

$(OPENVINO_STAMP): requirements/openvino.txt
	$(call candidate_venv,$(OPENVINO_VENV),openvino)

.PHONY: candidates
candidates: $(PADDLE_VENV)/.installed $(TORCHAX_STAMP) $(OPENVINO_STAMP)
