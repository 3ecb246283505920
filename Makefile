# The two README commands: `make run` (start Pooljudge on SQLite with tasks in-process) and
# `make test` (the whole test suite). Both create .venv on first use and reuse it afterwards.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

FUZZ_EXAMPLES ?= 20000
FUZZ_SEED ?=

.PHONY: run test fuzz lint install install-dev clean-venv

run: $(VENV)/.installed
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py demo --url http://$(HOST):$(PORT)/
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

# The suite runs on one process per core (at most TEST_PROCESSES): each has its own test
# database; the browser and real-worker tests share one of them (tests/conftest.py).
TEST_PROCESSES ?= 4

test: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/pytest -n auto --maxprocesses $(TEST_PROCESSES) --dist loadgroup

# The property tests only, with a fresh random seed (or FUZZ_SEED=N to replay a run) and
# FUZZ_EXAMPLES examples per parser property; `make test` always draws the same examples. A
# falsifying example is printed as an @example(...) line to paste above its test.
fuzz: $(VENV)/.installed-dev
	@seed="$(FUZZ_SEED)"; [ -n "$$seed" ] || seed=$$($(BIN)/python -c 'import secrets; print(secrets.randbelow(2**32))'); \
	echo "make fuzz: $(FUZZ_EXAMPLES) examples per parser property, seed $$seed (replay: make fuzz FUZZ_SEED=$$seed FUZZ_EXAMPLES=$(FUZZ_EXAMPLES))"; \
	HYPOTHESIS_PROFILE=fuzz HYPOTHESIS_EXAMPLES=$(FUZZ_EXAMPLES) HYPOTHESIS_ROUNDTRIP_EXAMPLES=$(FUZZ_EXAMPLES) \
	$(BIN)/pytest -p no:cacheprovider -m hypothesis --hypothesis-seed=$$seed --durations=0 --durations-min=1 $(FUZZ_ARGS)

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.created
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.created
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

clean-venv:
	rm -rf $(VENV)
