# Quick start: `make demo` and `make test`. Each bootstraps .venv by itself
# (created when missing, reinstalled when pyproject.toml is newer than it).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.luca-gym-installed
EXTRAS ?= dev
# Compiled generators and solvers are cached on disk and shared by the test
# workers and later runs (JAX reads this variable itself).
export JAX_COMPILATION_CACHE_DIR ?= $(CURDIR)/.cache/jax

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	@touch $(STAMP)

# The main job on built-in defaults: three baselines x 3 tiers x 2 modes x 5
# seeds, the table, and a report (markdown + figures) in results/demo.
demo: $(STAMP)
	@rm -f results/demo/sessions.jsonl
	$(BIN)/luca-gym eval --seeds 0-4 --out results/demo
	$(BIN)/luca-gym report results/demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --durations=15

bench: $(STAMP)
	$(BIN)/python benchmarks/solver.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .cache build *.egg-info
