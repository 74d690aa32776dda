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

# The suite runs as three pytest processes side by side: the tests marked `ray` (they share the session's simulated
# cluster, started once), those marked `embedded` (the demos and `rlplace run` on embedded clusters of their own,
# started in subprocesses: they mostly wait on them) and all the others (the planner, the loader, the docs, the
# explorer). On the 2-core CI machine a Ray test spends much of its time waiting on Ray, so the three overlap
# well. The other two reports are printed after the first; `make test` fails if any does.
test: $(VENV)/.torch
	$(BIN)/ruff check $(LINTED)
	$(BIN)/lint-imports
	@RLPLACE_TEST_HALF=1 $(BIN)/python -m pytest -q -m "not ray and not embedded" --durations=10 > $(VENV)/rest.log 2>&1 & \
	rest=$$!; \
	RLPLACE_TEST_HALF=2 $(BIN)/python -m pytest -q -m "embedded and not ray" --durations=10 > $(VENV)/embedded.log 2>&1 & \
	embedded=$$!; \
	echo "pytest: the tests marked ray here; the others run beside them (reports below)"; \
	RLPLACE_TEST_HALF=0 $(BIN)/python -m pytest -q -m ray --durations=10; ray=$$?; \
	wait $$embedded; e=$$?; wait $$rest; r=$$?; \
	echo "pytest: the tests marked embedded"; cat $(VENV)/embedded.log; \
	echo "pytest: the others"; cat $(VENV)/rest.log; \
	test $$ray -eq 0 -a $$e -eq 0 -a $$r -eq 0

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
