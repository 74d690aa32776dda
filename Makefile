# The two commands a newcomer types: `make demo` and `make test`. Each creates .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LINTED := src tests bench examples scripts conftest.py
# torch is an optional extra (rlplace[torch]). Where this machine keeps a CPU wheel on disk, the test venv
# takes it, so the offload round-trip tests run instead of skipping; elsewhere they skip (see docs/runtime.md).
TORCH_WHEEL := $(firstword $(wildcard /opt/wheels/torch-*+cpu-cp3*.whl))

.PHONY: demo test lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

$(VENV)/.torch: $(STAMP)
	$(if $(TORCH_WHEEL),$(BIN)/python -m pip install -q "$(TORCH_WHEEL)" || echo "torch wheel not installable here: torch tests skip")
	touch $@

demo: $(STAMP)
	$(BIN)/rlplace demo
	@echo "rlplace is installed in $(VENV): 'source $(VENV)/bin/activate' puts rlplace and its python on PATH (README.md)"

test: $(VENV)/.torch
	$(BIN)/ruff check $(LINTED)
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q --durations=15

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
