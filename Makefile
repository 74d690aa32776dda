# The two commands a newcomer types: `make demo` and `make test`. Each creates .venv when missing.
PYTHON ?= python3
# bash: make test reads the Ray half's exit status through a pipe (PIPESTATUS)
SHELL := /bin/bash
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
	$(BIN)/rlplace demo --out out
	@echo "rlplace is installed in $(VENV): 'source $(VENV)/bin/activate' puts rlplace and its python on PATH (README.md)"

# The suite runs as two pytest processes side by side: the tests marked `ray` (they share the session's simulated
# cluster, started once) and all the others (the planner, the loader, the docs, the demos on their own embedded
# clusters). On the 2-core CI machine a Ray test spends much of its time waiting on Ray, so the halves overlap
# well. The second half's report is printed after the first; then, last (where a CI log's tail shows it), each
# half's summary line and what failed in it. `make test` fails if either half does.
test: $(VENV)/.torch
	$(BIN)/ruff check $(LINTED)
	$(BIN)/lint-imports
	$(BIN)/mypy src
	@RLPLACE_TEST_HALF=1 $(BIN)/python -m pytest -q -rfE -m "not ray" --durations=10 > $(VENV)/not-ray.log 2>&1 & \
	others=$$!; \
	echo "pytest: the tests marked ray here; the others run beside them (report below)"; \
	RLPLACE_TEST_HALF=0 $(BIN)/python -m pytest -q -rfE -m ray --durations=10 2>&1 | tee $(VENV)/ray.log; \
	ray=$${PIPESTATUS[0]}; \
	wait $$others; rest=$$?; \
	echo "pytest: the tests not marked ray"; cat $(VENV)/not-ray.log; \
	echo "pytest: both halves"; \
	for half in ray not-ray; do \
	  echo "  $$half: $$(tail -n 1 $(VENV)/$$half.log)"; grep -E '^(FAILED|ERROR) ' $(VENV)/$$half.log | sed 's/^/    /'; \
	done; \
	test $$ray -eq 0 -a $$rest -eq 0

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .mypy_cache
