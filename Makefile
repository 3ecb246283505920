# The two README commands: `make run` (start Pooljudge on SQLite with tasks in-process) and
# `make test` (the whole test suite). Both create .venv on first use and reuse it afterwards.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint install install-dev clean-venv

run: $(VENV)/.installed
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py demo --url http://$(HOST):$(PORT)/
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

test: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/pytest

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
