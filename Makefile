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

.PHONY: demo test test-long lint clean installs

# pip writes no bytecode (--no-compile): compiling all of ray, torch and the rest is 16 s of one core, most of it
# for modules no run imports. scripts/warm_bytecode.py compiles what the runs import instead (4 s, beside pip
# installing torch's dependencies; then torch's, 3 s).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --no-compile -e '.[dev]'
	touch $(STAMP)

# torch's own files, without its dependencies: `make test` unpacks them (13 s of one core) beside the base install
# (20 s of the other), with which they share no file; its dependencies follow in $(VENV)/.torch.
$(VENV)/.torch-files: | $(BIN)/python
	$(if $(TORCH_WHEEL),$(BIN)/python -m pip install -q --no-compile --no-deps "$(TORCH_WHEEL)" || echo "torch wheel not installable here: torch tests skip";)
	touch $@

# The two installs at once (`make -j2 installs`: test's first step).
installs: $(STAMP) $(VENV)/.torch-files
	@:

$(VENV)/.torch: $(STAMP) $(VENV)/.torch-files
	$(BIN)/python scripts/warm_bytecode.py & warming=$$!; \
	$(if $(TORCH_WHEEL),$(BIN)/python -m pip install -q --no-compile "$(TORCH_WHEEL)" || echo "torch wheel not installable here: torch tests skip";) \
	$(BIN)/python scripts/warm_bytecode.py torch; \
	wait $$warming
	touch $@

# Every run here writes the bytecode of what it imports (the first time), even where $$PYTHONDONTWRITEBYTECODE is
# set (as on the project's 2-core machine): a run starts hundreds of Python processes (Ray's workers, the command
# line's), and each would otherwise compile ray, torch and rlplace anew, a tenth of a second to a second and a half.
unexport PYTHONDONTWRITEBYTECODE

demo: $(STAMP)
	$(BIN)/rlplace demo --out out
	@echo "rlplace is installed in $(VENV): 'source $(VENV)/bin/activate' puts rlplace and its python on PATH (README.md)"

# The suite runs as two pytest processes side by side: the tests marked `ray` (they share the session's simulated
# cluster, started once) and all the others (the planner, the loader, the docs, the demos on their own embedded
# clusters) on two pytest-xdist workers (a file's tests on one worker, in order), with `mypy src` beside them. On
# the 2-core CI machine the suite is CPU-bound and the Ray half is the longest: its raylets, GCS and workers wait
# on each other and on the clock (health checks, deadlines), so they run at normal priority and the rest at the
# lowest (nice 19), taking what the Ray half leaves. Measured, a fresh clone: both halves done in about 265 s; at
# equal priority the Ray half took 320-360 s. The tests marked `long` are left out (`make test-long`). The reports
# follow the Ray half's (printed as it runs); then, last (where a CI log's tail shows it), each half's summary line
# and what failed in it, and mypy's. `make test` fails if either half or mypy does. docs/decisions.md
# ("Dependencies") says why it is split so. On a fresh clone, the venv's install leaves a core idle in places:
# torch's files unpack beside the base install, and mypy (it skips torch: pyproject.toml) starts before torch's
# dependencies are installed and the bytecode is written, so less of its 12 CPU seconds falls among the halves'.
test:
	@$(MAKE) --no-print-directory -j2 installs
	$(BIN)/ruff check $(LINTED)
	$(BIN)/lint-imports
	@set -o pipefail; \
	nice -n 19 $(BIN)/mypy src > $(VENV)/mypy.log 2>&1 & \
	types=$$!; \
	$(MAKE) --no-print-directory $(VENV)/.torch || { kill $$types; exit 1; }; \
	RLPLACE_TEST_HALF=1 nice -n 19 $(BIN)/python -m pytest -q -rfE -m "not ray and not long" -n 2 --dist loadfile \
	  --durations=10 > $(VENV)/not-ray.log 2>&1 & \
	others=$$!; \
	echo "pytest: the tests marked ray here; the others and mypy src run beside them (reports below)"; \
	RLPLACE_TEST_HALF=0 $(BIN)/python -m pytest -q -rfE -m "ray and not long" --durations=10 2>&1 | tee $(VENV)/ray.log & \
	ray=$$!; \
	wait $$ray; ray=$$?; wait $$others; rest=$$?; wait $$types; types=$$?; \
	echo "pytest: the tests not marked ray"; cat $(VENV)/not-ray.log; \
	echo "mypy src"; cat $(VENV)/mypy.log; \
	echo "pytest: both halves, and mypy"; \
	for half in ray not-ray mypy; do \
	  echo "  $$half: $$(tail -n 1 $(VENV)/$$half.log)"; grep -E '^(FAILED|ERROR) ' $(VENV)/$$half.log | sed 's/^/    /'; \
	done; \
	test $$ray -eq 0 -a $$rest -eq 0 -a $$types -eq 0

# The tests marked `long`, which `make test` leaves out: behaviours it checks more cheaply, here at their full
# length (the node-loss demos trained until CartPole is solved). Minutes; docs/decisions.md lists what runs where.
test-long: $(VENV)/.torch
	$(BIN)/python -m pytest -q -rfE -m long --durations=10

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .mypy_cache
